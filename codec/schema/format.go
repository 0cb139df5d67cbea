package schema

import (
	"context"
	"errors"
	"fmt"

	"github.com/flakestream/flakestream/codec"
	"github.com/twmb/franz-go/pkg/sr"
)

// Format numbers Avro or Protobuf values through a schema registry. It is a
// [codec.Format], safe for concurrent use; schemas and output IDs are cached
// for its lifetime.
type Format struct {
	s Settings
	c cache
}

var _ codec.Format = (*Format)(nil)

// New validates s and returns a Format. Nothing is fetched until the first
// value. It returns an error wrapping codec.ErrInvalidConfig for a bad
// setting (a missing URL, an unknown strategy...).
func New(s Settings) (*Format, error) {
	if err := s.validate(); err != nil {
		return nil, err
	}
	f := &Format{s: s}
	f.c = cache{s: &f.s, unknown: map[int]unknown{}, out: map[outKey]int{}, refs: map[string]sr.SubjectSchema{}}
	return f, nil
}

// Name returns codec.ValueAvro or codec.ValueProtobuf.
func (f *Format) Name() codec.ValueFormat { return f.s.Format }

// Client returns the registry client, for callers that register input
// schemas themselves (the demo, tests).
func (f *Format) Client() *sr.Client { return f.s.Client }

// frame is a value's header, resolved: its writer and, for Protobuf, the
// message type and where the payload starts.
type frame struct {
	w   *writer
	msg *protoMsg
	off int // payload offset
}

// open parses the header and fetches the writer schema.
func (f *Format) open(ctx context.Context, value []byte) (frame, *codec.InputError, error) {
	if len(value) > f.s.MaxBytes {
		return frame{}, &codec.InputError{Class: codec.ClassTooLarge, Offset: f.s.MaxBytes,
			Msg: "value is larger than the configured limit (MaxBytes); it was not read"}, nil
	}
	id, bad := schemaID(value)
	if bad != nil {
		return frame{}, bad, nil
	}
	w, bad, err := f.c.writer(ctx, id)
	if err != nil || bad != nil {
		return frame{}, bad, err
	}
	fr := frame{w: w, off: headerLen}
	if w.proto != nil {
		_, off, bad := messageIndexes(value, headerLen)
		if bad != nil {
			return frame{}, bad, nil
		}
		fr.msg, fr.off = w.proto.message(value[headerLen:off]), off
	}
	return fr, nil, nil
}

// Inspect says what to do with value. The value is Bad (dead-lettered,
// untouched) when it is larger than MaxBytes (ClassTooLarge), is not framed
// (ClassNotFramed), names a schema ID the registry does not know or a
// schema that does not parse as the configured format (ClassUnknownSchema),
// does not decode with its writer schema (ClassUndecodable), has no usable
// number field (ClassNoNumberField: a Protobuf message without it, a field
// of another type, an Avro top level that is not a record), or holds an
// invalid number (ClassInvalidNumber). An error is a registry failure
// (errors.Is codec.ErrUnavailable: retry) or the context's.
func (f *Format) Inspect(ctx context.Context, value []byte) (codec.Inspection, error) {
	fr, bad, err := f.open(ctx, value)
	if err != nil {
		return codec.Inspection{}, err
	}
	if bad != nil {
		return codec.Reject(bad), nil
	}
	var (
		kind codec.Kind
		n    int64
	)
	if p := fr.w.avro; p != nil {
		rp, off, bad := p.record(value[headerLen:])
		if bad != nil {
			return codec.Reject(bad), nil
		}
		kind, n, bad = rp.inspect(value[headerLen+off:], headerLen+off, &f.s)
		if bad != nil {
			return codec.Reject(bad), nil
		}
	} else {
		if fr.msg.bad != nil {
			return codec.Reject(fr.msg.bad), nil
		}
		kind, n, bad = fr.msg.inspect(value[fr.off:], fr.off, &f.s)
	}
	switch {
	case bad != nil:
		return codec.Reject(bad), nil
	case kind == codec.HasNumber:
		return codec.Has(n, len(value)), nil
	}
	return codec.Needs(len(value)), nil
}

// errNoTopic: a Format made without OutputTopic (for the audit, which only
// reads) cannot name the output subject.
var errNoTopic = fmt.Errorf("schema: numbering needs Settings.OutputTopic to name the output subject: %w", codec.ErrInvalidConfig)

// errNotInspected is a caller's bug: AppendNumbered without its Inspection.
var errNotInspected = errors.New("schema: AppendNumbered needs the NeedsNumber Inspection of the same value")

// AppendNumbered appends to dst value numbered with id: re-framed with the
// output schema's ID (registered on first use), the payload unchanged but
// for the number (appended, or replacing the field's bytes; see the package
// comment). The error is a registry failure (retry, codec.ErrUnavailable),
// an [*IncompatibleError] (fatal), or a caller's bug.
func (f *Format) AppendNumbered(ctx context.Context, dst, value []byte, insp codec.Inspection, id int64) ([]byte, error) {
	if insp.Kind != codec.NeedsNumber || insp.Size() != len(value) || id < 0 {
		return dst, errNotInspected
	}
	fr, bad, err := f.open(ctx, value)
	if err != nil {
		return dst, err
	}
	if bad != nil {
		return dst, fmt.Errorf("%w: %v", errNotInspected, bad)
	}
	if p := fr.w.avro; p != nil {
		if f.s.OutputTopic == "" && f.s.Strategy != RecordName {
			return dst, errNoTopic
		}
		outID, err := f.c.outputID(ctx, fr.w, p.subject, p.out, &p.outID)
		if err != nil {
			return dst, err
		}
		payload := value[headerLen:]
		rp, off, bad := p.record(payload)
		if bad != nil {
			return dst, fmt.Errorf("%w: %v", errNotInspected, bad)
		}
		dst = appendFrame(dst, outID, nil)
		if rp.field < 0 {
			dst = append(dst, payload...)
			return rp.appendNumber(dst, id), nil
		}
		start, end, _, werr := walkRecord(payload[off:], rp.rec, rp.field, rp.lim)
		if werr != nil {
			return dst, fmt.Errorf("%w: %v", errNotInspected, werr)
		}
		dst = append(dst, payload[:off+start]...)
		dst = rp.appendNumber(dst, id)
		return append(dst, payload[off+end:]...), nil
	}
	if fr.msg.bad != nil {
		return dst, fmt.Errorf("%w: %v", errNotInspected, fr.msg.bad)
	}
	if f.s.OutputTopic == "" && f.s.Strategy != RecordName {
		return dst, errNoTopic
	}
	outID, err := f.c.outputID(ctx, fr.w, fr.msg.subject, fr.w.proto.out, &fr.msg.outID)
	if err != nil {
		return dst, err
	}
	dst = appendFrame(dst, outID, nil)
	dst = append(dst, value[headerLen:]...) // message indexes and payload
	return fr.msg.appendNumber(dst, id), nil
}

// Field returns top-level field name of the record as key bytes: a string's
// or bytes' content, an integer's decimal text, an enum's symbol. ok is
// false when the schema lacks the field or it is null (Protobuf: unset).
// err is an *InputError when the value is not framed, its schema unknown,
// or it does not decode (their classes), or the field is of another type
// (ClassMissingKey); or a registry failure.
func (f *Format) Field(ctx context.Context, value []byte, name string) ([]byte, bool, error) {
	fr, bad, err := f.open(ctx, value)
	if err != nil {
		return nil, false, err
	}
	if bad != nil {
		return nil, false, bad
	}
	if p := fr.w.avro; p != nil {
		rp, off, bad := p.record(value[headerLen:])
		if bad != nil {
			return nil, false, bad
		}
		raw, ok, bad := rp.fieldValue(value[headerLen+off:], headerLen+off, name)
		if bad != nil {
			return nil, false, bad
		}
		return raw, ok, nil
	}
	if fr.msg.md == nil {
		return nil, false, fr.msg.bad
	}
	raw, ok, bad := fr.msg.fieldValue(value[fr.off:], fr.off, name)
	if bad != nil {
		return nil, false, bad
	}
	return raw, ok, nil
}

// Number reads back the record's number, for the audit when the number
// header is missing. ok is false when it has none or an invalid one; err is
// an *InputError when the value cannot be read at all, or a registry
// failure.
func (f *Format) Number(ctx context.Context, value []byte) (int64, bool, error) {
	insp, err := f.Inspect(ctx, value)
	switch {
	case err != nil:
		return 0, false, err
	case insp.Kind == codec.HasNumber:
		return insp.Number, true, nil
	case insp.Kind == codec.NeedsNumber, insp.Class() == codec.ClassInvalidNumber:
		return 0, false, nil
	}
	return 0, false, insp.Err()
}

package codec

import (
	"context"
	"errors"
	"fmt"
)

// ErrUnavailable marks an error that is not the record's fault: a service the
// format depends on (the schema registry) is unreachable or failing. The
// worker aborts the transaction and retries the batch, as for a Redis
// outage; it never dead-letters a record for it. Test with errors.Is.
var ErrUnavailable = errors.New("codec: dependency unavailable, retry")

// ValueFormat names the encoding of record values: the --value-format flag.
type ValueFormat string

// Value formats.
const (
	ValueJSON     ValueFormat = "json"
	ValueAvro     ValueFormat = "avro"
	ValueProtobuf ValueFormat = "protobuf"
)

// ParseValueFormat parses "json", "avro" or "protobuf"; "" means json.
func ParseValueFormat(s string) (ValueFormat, error) {
	switch ValueFormat(s) {
	case "", ValueJSON:
		return ValueJSON, nil
	case ValueAvro, ValueProtobuf:
		return ValueFormat(s), nil
	}
	return "", fmt.Errorf("codec: value format %q: want json, avro or protobuf: %w", s, ErrInvalidConfig)
}

// Format finds, reads and writes the order number in one value encoding. The
// worker, replay and the audit call every format the same way:
//
//	insp, err := f.Inspect(ctx, value)   // err: abort and retry, or fatal
//	switch insp.Kind {
//	case NeedsNumber: out, err = f.AppendNumbered(ctx, dst, value, insp, id)
//	case HasNumber:   pass value through unchanged; insp.Number is its number
//	case Bad:         dead-letter value untouched, class insp.Class()
//	}
//
// A non-nil error from any method is never the record's fault: it wraps
// ErrUnavailable when a retry can help (the registry is down or answers
// 5xx), and is fatal otherwise (for example an output schema the registry
// refuses as incompatible). Problems with the record itself are reported in
// the Inspection (or, for Field and Number, as an [*InputError]).
// Implementations are safe for concurrent use.
type Format interface {
	// Name returns the format's --value-format name.
	Name() ValueFormat
	// Inspect says what to do with value: number it, pass it through with
	// its existing valid number, or dead-letter it with a class.
	Inspect(ctx context.Context, value []byte) (Inspection, error)
	// AppendNumbered appends value with its number set to id to dst. insp
	// must be the NeedsNumber Inspection of value. The numbered value is at
	// most len(value)+2*len(field)+48 bytes, for every format.
	AppendNumbered(ctx context.Context, dst, value []byte, insp Inspection, id int64) ([]byte, error)
	// Field returns the top-level field name's value as key bytes (a
	// string's content, an integer's decimal text), for --idempotency-key
	// field:<name>. ok is false when it is absent or null. A field of a
	// type that cannot be a key is an *InputError of ClassMissingKey.
	Field(ctx context.Context, value []byte, name string) (raw []byte, ok bool, err error)
	// Number reads back the number that value carries, for the audit when
	// the number header is missing. ok is false when it has none or the one
	// it has is not a canonical number in 0..2^63-1.
	Number(ctx context.Context, value []byte) (n int64, ok bool, err error)
}

// Reject returns a Bad Inspection carrying e, for Format implementations
// outside this package. e.Class must be set.
func Reject(e *InputError) Inspection {
	return Inspection{class: e.Class, at: e.Offset, msg: e.Msg, cause: e.Err}
}

// Needs returns a NeedsNumber Inspection of a value of size bytes, for Format
// implementations outside this package; they read their own state back from
// the value in AppendNumbered.
func Needs(size int) Inspection { return Inspection{Kind: NeedsNumber, size: size} }

// Size returns the length of the value the Inspection was made for.
func (in Inspection) Size() int { return in.size }

// ParseNumber is the one rule for a number written out by flakestream: a
// canonical decimal int64 in 0..2^63-1, digits only, no sign, no leading
// zero, so that every number has exactly one spelling. The worker accepts
// input numbers by it and the audit reads numbered records by it. The error
// says what is wrong.
func ParseNumber(b []byte) (int64, error) {
	n, msg := parseDigits(b)
	if msg != "" {
		return 0, errors.New(msg)
	}
	return n, nil
}

// JSONFormat is the [Format] of JSON values: a thin adapter over [Codec]
// that behaves exactly as Codec.Inspect, Codec.AppendNumbered and [Field].
type JSONFormat struct{ C *Codec }

var _ Format = JSONFormat{}

// Name returns ValueJSON.
func (JSONFormat) Name() ValueFormat { return ValueJSON }

// Inspect is Codec.Inspect; its error is always nil.
func (f JSONFormat) Inspect(_ context.Context, value []byte) (Inspection, error) {
	return f.C.Inspect(value), nil
}

// AppendNumbered is Codec.AppendNumbered; its error is always nil.
func (f JSONFormat) AppendNumbered(_ context.Context, dst, value []byte, insp Inspection, id int64) ([]byte, error) {
	return f.C.AppendNumbered(dst, value, insp, id), nil
}

// Field is the package's [Field].
func (JSONFormat) Field(_ context.Context, value []byte, name string) ([]byte, bool, error) {
	return Field(value, name)
}

// Number reads the number field with [Field] and parses it with ParseNumber.
// An invalid number is ok false, not an error; an error is an *InputError
// about the value.
func (f JSONFormat) Number(_ context.Context, value []byte) (int64, bool, error) {
	raw, ok, err := Field(value, f.C.field)
	if err != nil || !ok {
		return 0, false, err
	}
	n, perr := ParseNumber(raw)
	return n, perr == nil, nil
}

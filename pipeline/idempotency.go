package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/idgen"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Idempotency gives every record with the same idempotency key the same
// number: an order read twice (a replay, a producer retry upstream, a
// backfill) keeps the number it was first given.
type Idempotency struct {
	// Store decides, atomically in Redis, which number a key has.
	Store *idgen.KeyStore
	// Field is the top-level field that holds the key (JSON, or Avro or
	// Protobuf through the worker's Format); "" (with Header "") means the
	// Kafka record key.
	Field string
	// Header, if set instead of Field, is the record header that holds the
	// key (the last one of that name).
	Header string
	// Optional numbers a record without a key like any other; otherwise it
	// goes to the DLQ as missing_key.
	Optional bool
	// Drop drops repeats (counted) instead of emitting them with the
	// flakestream-repeat: true header.
	Drop bool
}

// ErrIdempotencyKey is a bad --idempotency-key or --on-repeat (or the
// audit's --key).
var ErrIdempotencyKey = errors.New("pipeline: invalid idempotency setting")

// KeySpec says where a record's order key is: the Kafka record key (both
// fields empty), a top-level field of the value, or a header. It is what
// --idempotency-key names for the worker, and --key for the audit, so the
// two read one key the same way.
type KeySpec struct {
	// Field is a top-level field of the value, read through a
	// codec.Format (JSON, Avro or Protobuf).
	Field string
	// Header is a record header, the last one of that name.
	Header string
}

// ParseKeySpec parses "key" (the record key), "field:<name>" (a top-level
// field of the value) or "header:<name>" (a record header). Errors wrap
// ErrIdempotencyKey.
func ParseKeySpec(s string) (KeySpec, error) {
	switch {
	case s == "key":
		return KeySpec{}, nil
	case strings.HasPrefix(s, "field:") && len(s) > len("field:"):
		return KeySpec{Field: strings.TrimPrefix(s, "field:")}, nil
	case strings.HasPrefix(s, "header:") && len(s) > len("header:"):
		return KeySpec{Header: strings.TrimPrefix(s, "header:")}, nil
	}
	return KeySpec{}, fmt.Errorf("%w: key %q: want \"key\", \"field:<name>\" or \"header:<name>\"", ErrIdempotencyKey, s)
}

// String returns the spec as ParseKeySpec reads it.
func (k KeySpec) String() string {
	switch {
	case k.Field != "":
		return "field:" + k.Field
	case k.Header != "":
		return "header:" + k.Header
	}
	return "key"
}

// ParseOnRepeat parses "emit" or "drop" into Idempotency.Drop.
func ParseOnRepeat(s string) (drop bool, err error) {
	switch s {
	case "emit", "":
		return false, nil
	case "drop":
		return true, nil
	}
	return false, fmt.Errorf("%w: on repeat %q: want emit or drop", ErrIdempotencyKey, s)
}

// spec is the idempotency's key spec.
func (i *Idempotency) spec() KeySpec { return KeySpec{Field: i.Field, Header: i.Header} }

// key returns the record's idempotency key; see KeySpec.Key.
func (i *Idempotency) key(ctx context.Context, f codec.Format, r *kgo.Record) ([]byte, error) {
	return i.spec().Key(ctx, f, r)
}

// Key returns r's key, or why it has none. The field is read through f, so
// a top-level Avro or Protobuf field is a key too. An error that is not the
// record's fault (a registry outage) is returned wrapped in a *KeyFailedError;
// every other error means the record has no usable key (absent, null,
// empty, or a field of a type that cannot be a key).
func (k KeySpec) Key(ctx context.Context, f codec.Format, r *kgo.Record) ([]byte, error) {
	switch {
	case k.Header != "":
		v, ok := codec.LastHeader(r.Headers, k.Header)
		switch {
		case !ok:
			return nil, fmt.Errorf("header %q is missing", k.Header)
		case len(v) == 0:
			return nil, fmt.Errorf("header %q is empty", k.Header)
		}
		return v, nil
	case k.Field == "":
		if len(r.Key) == 0 {
			return nil, errors.New("record has no key")
		}
		return r.Key, nil
	}
	raw, ok, err := f.Field(ctx, r.Value, k.Field)
	var bad *codec.InputError
	switch {
	case err != nil && !errors.As(err, &bad):
		return nil, &KeyFailedError{err}
	case err != nil:
		return nil, fmt.Errorf("field %q: %w", k.Field, err)
	case !ok || len(raw) == 0:
		return nil, fmt.Errorf("field %q is missing, null or empty", k.Field)
	}
	return raw, nil
}

// KeyFailedError is a key that could not be read for a reason other than
// the record (a registry outage): the batch fails (or, for anything but a
// registry outage, Run).
type KeyFailedError struct{ Err error }

func (e *KeyFailedError) Error() string { return "idempotency key: " + e.Err.Error() }
func (e *KeyFailedError) Unwrap() error { return e.Err }

// keyFailure returns the batch's error for an error from key, or nil when
// the record just has no usable key.
func keyFailure(err error) error {
	var kf *KeyFailedError
	if errors.As(err, &kf) {
		return formatError(kf.Err)
	}
	return nil
}

// Record fates beyond what the codec says, for a batch with idempotency.
const (
	noClaim    = -1 // no key: numbered like any record
	missingKey = -2 // no key and one is required: dead-lettered
)

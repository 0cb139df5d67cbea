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
	// Protobuf through the worker's Format); "" means the Kafka record key.
	Field string
	// Optional numbers a record without a key like any other; otherwise it
	// goes to the DLQ as missing_key.
	Optional bool
	// Drop drops repeats (counted) instead of emitting them with the
	// flakestream-repeat: true header.
	Drop bool
}

// ErrIdempotencyKey is a bad --idempotency-key or --on-repeat.
var ErrIdempotencyKey = errors.New("pipeline: invalid idempotency setting")

// ParseIdempotencyKey parses "key" (the record key) or "field:<name>" (a
// top-level field of the value) into the Field of an Idempotency.
func ParseIdempotencyKey(s string) (field string, err error) {
	switch {
	case s == "key":
		return "", nil
	case strings.HasPrefix(s, "field:") && len(s) > len("field:"):
		return strings.TrimPrefix(s, "field:"), nil
	}
	return "", fmt.Errorf("%w: key %q: want \"key\" or \"field:<name>\"", ErrIdempotencyKey, s)
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

// key returns the record's idempotency key, or why it has none. The field
// is read through f, so a top-level Avro or Protobuf field is a key too.
// An error that is not the record's fault (a registry outage) is returned
// wrapped in a *keyFailed; see keyFailure.
func (i *Idempotency) key(ctx context.Context, f codec.Format, r *kgo.Record) ([]byte, error) {
	if i.Field == "" {
		if len(r.Key) == 0 {
			return nil, errors.New("record has no key")
		}
		return r.Key, nil
	}
	raw, ok, err := f.Field(ctx, r.Value, i.Field)
	var bad *codec.InputError
	switch {
	case err != nil && !errors.As(err, &bad):
		return nil, &keyFailed{err}
	case err != nil:
		return nil, fmt.Errorf("field %q: %w", i.Field, err)
	case !ok || len(raw) == 0:
		return nil, fmt.Errorf("field %q is missing, null or empty", i.Field)
	}
	return raw, nil
}

// keyFailed is a key that could not be read for a reason other than the
// record: the batch fails (or, for anything but a registry outage, Run).
type keyFailed struct{ err error }

func (e *keyFailed) Error() string { return "idempotency key: " + e.err.Error() }
func (e *keyFailed) Unwrap() error { return e.err }

// keyFailure returns the batch's error for an error from key, or nil when
// the record just has no usable key.
func keyFailure(err error) error {
	var kf *keyFailed
	if errors.As(err, &kf) {
		return formatError(kf.err)
	}
	return nil
}

// Record fates beyond what the codec says, for a batch with idempotency.
const (
	noClaim    = -1 // no key: numbered like any record
	missingKey = -2 // no key and one is required: dead-lettered
)

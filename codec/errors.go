package codec

import (
	"errors"
	"strconv"
)

// Class names why a record went to the dead-letter topic. Its string is the
// value of the [HeaderErrorClass] header, so dashboards can group dead
// letters without parsing messages.
type Class string

// Error classes. The order of the first six is also their precedence: a value
// with several problems is reported under the first class that applies, so a
// given value always lands in the same class.
const (
	// ClassTooLarge: the value is longer than Config.MaxBytes; it was not
	// scanned.
	ClassTooLarge Class = "too_large"
	// ClassInvalidUTF8: some bytes of the value, inside a string or not, are
	// not UTF-8.
	ClassInvalidUTF8 Class = "invalid_utf8"
	// ClassNotJSON: the value is not well-formed JSON (RFC 8259).
	ClassNotJSON Class = "not_json"
	// ClassNotObject: the value is JSON, but its top level is not an object.
	ClassNotObject Class = "not_object"
	// ClassDuplicateField: the number field appears more than once at the
	// top level, so which one counts is ambiguous.
	ClassDuplicateField Class = "duplicate_field"
	// ClassInvalidNumber: the number field holds something other than null,
	// a non-negative int64 or a string of its decimal digits, or the
	// number failed Config.Valid.
	ClassInvalidNumber Class = "invalid_number"
	// ClassMissingKey: an idempotency key that is required is absent, null,
	// or of a type that cannot be a key. Inspect never reports it; the
	// worker does, after [Field].
	ClassMissingKey Class = "missing_key"

	// Classes of the schema-registry formats (Avro and Protobuf in the
	// Confluent wire format, package codec/schema).

	// ClassNotFramed: the value does not start with the wire format's
	// header (magic byte 0 and a 4-byte schema ID, and for Protobuf the
	// message indexes), or is shorter than it.
	ClassNotFramed Class = "not_framed"
	// ClassUnknownSchema: the registry does not know the value's schema ID
	// (it answered 404), or the schema it returned cannot be parsed.
	ClassUnknownSchema Class = "unknown_schema"
	// ClassUndecodable: the payload does not decode with its writer schema.
	ClassUndecodable Class = "undecodable"
	// ClassNoNumberField: the writer schema has no field by the number
	// field's name that can hold a number (a Protobuf message without it,
	// a field of another type, or an Avro schema whose top level is not a
	// record).
	ClassNoNumberField Class = "no_number_field"

	// Classes of the limits on the work one record may cost, applied to
	// every value format (see Config.MaxDepth and Config.MaxElements).

	// ClassTooDeep: the value nests arrays, objects, records or messages
	// deeper than the depth limit.
	ClassTooDeep Class = "too_deep"
	// ClassTooManyElements: the value holds more elements (values at every
	// level: array items, map entries, members, fields) than the limit.
	ClassTooManyElements Class = "too_many_elements"
	// ClassSchemaNotAllowed: the value's schema ID is neither in the
	// allow-list nor registered under a subject in it.
	ClassSchemaNotAllowed Class = "schema_not_allowed"

	// Classes of a pre-filled number that decodes but is not believed. The
	// worker reports them after Inspect, when it judges the number (see
	// pipeline.Trust); they are dead-lettered unless the worker is told to
	// renumber such records.

	// ClassUnknownServer: the number's server ID is not an allowed one.
	ClassUnknownServer Class = "unknown_server"
	// ClassUnknownWorker: the number's worker ID is not an allowed one.
	ClassUnknownWorker Class = "unknown_worker"
	// ClassFutureNumber: the number's time is further ahead of the worker's
	// clock than the allowed skew.
	ClassFutureNumber Class = "future_number"
	// ClassKeyMismatch: the record's idempotency key already has a
	// different number.
	ClassKeyMismatch Class = "key_mismatch"
	// ClassNumberTaken: the number already belongs to another idempotency
	// key (with the number index on): another order's number. Never
	// renumbered.
	ClassNumberTaken Class = "number_taken"

	// Classes of records the worker could not produce as they are.

	// ClassOutputTooLarge: the numbered (or passed-through) output record
	// would be larger than what the output topic, the brokers or
	// --max-produce-bytes allow, so the input went to the dead-letter
	// topic instead. The worker decides this before producing; the
	// record never reaches a broker.
	ClassOutputTooLarge Class = "output_too_large"
	// ClassRejected: a broker refused the record itself when it was
	// produced (MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE, INVALID_RECORD,
	// CORRUPT_MESSAGE, INVALID_TIMESTAMP, POLICY_VIOLATION, or the
	// client's own too-large check): a limit changed after the worker
	// learnt it, or a broker policy. That transaction aborted; on its
	// retry the record went to the dead-letter topic alone.
	ClassRejected Class = "rejected"
)

// Dead-letter and numbered-record header names.
const (
	// HeaderNumber carries the record's number in decimal, so consumers can
	// route on it without parsing the value.
	HeaderNumber = "flakestream-number"
	// HeaderSource says where a record came from, as "topic/partition/offset"
	// (see [AppendSource] and [ParseSource]).
	HeaderSource = "flakestream-source"
	// HeaderErrorClass carries a [Class] on a dead letter.
	HeaderErrorClass = "flakestream-error-class"
	// HeaderError carries the human-readable reason on a dead letter.
	HeaderError = "flakestream-error"
	// HeaderRepeat marks a record that the worker numbered again with a
	// number it had already issued for the same idempotency key.
	HeaderRepeat = "flakestream-repeat"
	// HeaderRenumbered marks a record that arrived with a number the worker
	// did not believe and was given another; its value is the [Class] the
	// number was rejected for (unknown_server, future_number, ...).
	HeaderRenumbered = "flakestream-renumbered"
	// HeaderReference marks a dead letter whose value is a [Reference]
	// (JSON) instead of the input's bytes, because the input would not
	// fit the dead-letter topic.
	HeaderReference = "flakestream-reference"
)

// Sentinel errors. Every [InputError] unwraps to the one for its class, so
// callers can test with errors.Is.
var (
	ErrTooLarge           = errors.New("value is larger than the size limit")
	ErrInvalidUTF8        = errors.New("value is not valid utf-8")
	ErrNotJSON            = errors.New("value is not well-formed json")
	ErrNotObject          = errors.New("value is not a json object")
	ErrDuplicateField     = errors.New("field appears more than once")
	ErrInvalidNumber      = errors.New("number field holds no valid number")
	ErrMissingKey         = errors.New("idempotency key is missing")
	ErrInvalidConfig      = errors.New("invalid codec configuration")
	ErrInvalidSource      = errors.New("invalid source")
	ErrInvalidAuditRecord = errors.New("invalid audit record")
	ErrNotFramed          = errors.New("value is not in the schema registry wire format")
	ErrUnknownSchema      = errors.New("schema id is unknown to the registry")
	ErrUndecodable        = errors.New("payload does not decode with its writer schema")
	ErrNoNumberField      = errors.New("schema has no number field")
	ErrTooDeep            = errors.New("value nests deeper than the depth limit")
	ErrTooManyElements    = errors.New("value holds more elements than the limit")
	ErrSchemaNotAllowed   = errors.New("schema is not in the allowed subjects")
	ErrUnknownServer      = errors.New("number's server id is not allowed")
	ErrUnknownWorker      = errors.New("number's worker id is not allowed")
	ErrFutureNumber       = errors.New("number's time is too far in the future")
	ErrKeyMismatch        = errors.New("number differs from the idempotency key's number")
	ErrNumberTaken        = errors.New("number belongs to another idempotency key")
	ErrOutputTooLarge     = errors.New("output record is larger than the output topic allows")
	ErrRejected           = errors.New("a broker refused the record")
	ErrInvalidReference   = errors.New("invalid reference record")
)

// allClasses lists every class, in precedence order for ClassOf.
var allClasses = [...]Class{ClassTooLarge, ClassInvalidUTF8, ClassNotJSON, ClassNotObject,
	ClassDuplicateField, ClassInvalidNumber, ClassMissingKey,
	ClassNotFramed, ClassUnknownSchema, ClassUndecodable, ClassNoNumberField,
	ClassTooDeep, ClassTooManyElements, ClassSchemaNotAllowed,
	ClassUnknownServer, ClassUnknownWorker, ClassFutureNumber, ClassKeyMismatch, ClassNumberTaken,
	ClassOutputTooLarge, ClassRejected}

// Classes returns every class, in the order of precedence.
func Classes() []Class { return append([]Class(nil), allClasses[:]...) }

// Err returns the sentinel error for c, or nil for an unknown class.
func (c Class) Err() error {
	switch c {
	case ClassTooLarge:
		return ErrTooLarge
	case ClassInvalidUTF8:
		return ErrInvalidUTF8
	case ClassNotJSON:
		return ErrNotJSON
	case ClassNotObject:
		return ErrNotObject
	case ClassDuplicateField:
		return ErrDuplicateField
	case ClassInvalidNumber:
		return ErrInvalidNumber
	case ClassMissingKey:
		return ErrMissingKey
	case ClassNotFramed:
		return ErrNotFramed
	case ClassUnknownSchema:
		return ErrUnknownSchema
	case ClassUndecodable:
		return ErrUndecodable
	case ClassNoNumberField:
		return ErrNoNumberField
	case ClassTooDeep:
		return ErrTooDeep
	case ClassTooManyElements:
		return ErrTooManyElements
	case ClassSchemaNotAllowed:
		return ErrSchemaNotAllowed
	case ClassUnknownServer:
		return ErrUnknownServer
	case ClassUnknownWorker:
		return ErrUnknownWorker
	case ClassFutureNumber:
		return ErrFutureNumber
	case ClassKeyMismatch:
		return ErrKeyMismatch
	case ClassNumberTaken:
		return ErrNumberTaken
	case ClassOutputTooLarge:
		return ErrOutputTooLarge
	case ClassRejected:
		return ErrRejected
	}
	return nil
}

// ClassOf returns the class of err: the Class of an [*InputError] in its
// chain, else the class whose sentinel it wraps, else "". The worker writes
// the result to [HeaderErrorClass].
func ClassOf(err error) Class {
	if err == nil {
		return ""
	}
	if ie, ok := errors.AsType[*InputError](err); ok {
		return ie.Class
	}
	for _, c := range allClasses {
		if errors.Is(err, c.Err()) {
			return c
		}
	}
	return ""
}

// InputError says what is wrong with a record value and where, so a dead
// letter can be fixed without guessing.
type InputError struct {
	// Class is why the value was rejected.
	Class Class
	// Offset is the byte offset in the value where the problem was found.
	Offset int
	// Msg describes the problem.
	Msg string
	// Err is the underlying cause, if any (for example the error returned by
	// Config.Valid); nil otherwise.
	Err error
}

// Error reports the class, the offset and the reason on one line.
func (e *InputError) Error() string {
	b := make([]byte, 0, 64+len(e.Msg))
	b = append(b, "codec: "...)
	if e.Class != "" {
		b = append(b, e.Class...)
		b = append(b, ' ')
	}
	b = append(b, "at byte "...)
	b = strconv.AppendInt(b, int64(e.Offset), 10)
	b = append(b, ": "...)
	b = append(b, e.Msg...)
	if e.Err != nil {
		b = append(b, ": "...)
		b = append(b, e.Err.Error()...)
	}
	return string(b)
}

// Unwrap returns the sentinel for e.Class and, if set, e.Err, so errors.Is
// and errors.As match either. (As a multi-error Unwrap, errors.Unwrap does
// not follow it.)
func (e *InputError) Unwrap() []error {
	errs := make([]error, 0, 2)
	if s := e.Class.Err(); s != nil {
		errs = append(errs, s)
	}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	return errs
}

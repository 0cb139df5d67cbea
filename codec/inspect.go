package codec

import (
	"fmt"
	"math"
)

// Kind is what the worker must do with an inspected order event.
type Kind uint8

const (
	// Bad: the event cannot be numbered; send it, untouched, to the
	// dead-letter topic with Inspection.Class and Inspection.Err. It is the
	// zero Kind, so an Inspection that was never filled in is never spliced.
	Bad Kind = iota
	// NeedsNumber: the number field is absent or null; number the event
	// with Codec.AppendNumbered.
	NeedsNumber
	// HasNumber: the event already carries a valid number,
	// Inspection.Number; pass it through unchanged.
	HasNumber
)

// kindNames are the Kinds' names, by value.
var kindNames = [...]string{Bad: "bad", NeedsNumber: "needs_number", HasNumber: "has_number"}

// String returns "bad", "needs_number" or "has_number".
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Inspection is the result of [Codec.Inspect]: what to do with the event and
// where to splice the number, so that numbering needs no second scan. It is
// a plain value; keeping it costs no allocation.
type Inspection struct {
	// Kind says whether the event needs a number, has one, or is bad.
	Kind Kind
	// Number is the event's existing number when Kind is HasNumber, else 0.
	Number int64

	// Why the event is Bad.
	field string
	class Class
	at    int
	msg   string
	cause error

	// Where to splice. size guards against splicing a different value.
	size     int
	insertAt int  // where a new member goes (absent field)
	empty    bool // the object has no members: no leading comma
	replace  bool // the field's value [repAt, repEnd) is replaced: a null, or a renumbered number
	repAt    int
	repEnd   int
}

// Has returns a HasNumber Inspection of a value of size bytes carrying
// number n, for Format implementations outside this package; [Renumber]
// needs the size.
func Has(n int64, size int) Inspection { return Inspection{Kind: HasNumber, Number: n, size: size} }

// Renumber turns the HasNumber Inspection of a value into a NeedsNumber one,
// for a worker told to give a pre-filled number it does not believe a
// fresh one: AppendNumbered then writes the new number in place of the
// old (for JSON, the old value's bytes are replaced; a schema format
// re-reads the value). Any other Inspection is returned as it is.
func (in Inspection) Renumber() Inspection {
	if in.Kind != HasNumber {
		return in
	}
	in.Kind, in.Number = NeedsNumber, 0
	return in
}

// Class returns why the event is Bad, or "" if it is not.
func (in Inspection) Class() Class {
	if in.Kind != Bad {
		return ""
	}
	return in.class
}

// Err returns an [*InputError] saying why the event is Bad, or nil if it is
// not. It allocates, so call it only on the dead-letter path.
func (in Inspection) Err() error {
	if in.Kind != Bad {
		return nil
	}
	msg := in.msg
	switch in.class {
	case ClassDuplicateField, ClassInvalidNumber:
		if in.field == "" { // a Rejected inspection: Msg is complete
			break
		}
		msg = fmt.Sprintf("field %q: %s", in.field, msg)
	case "":
		// A zero Inspection: a bug in the caller, not in the value.
		return &InputError{Msg: "value was never inspected"}
	}
	return &InputError{Class: in.class, Offset: in.at, Msg: msg, Err: in.cause}
}

// Inspect reads value once and says what the worker must do with it. It
// neither modifies value nor allocates.
//
// The event is Bad when (in this order of precedence): it is longer than
// MaxBytes (ClassTooLarge, without reading it), is not UTF-8
// (ClassInvalidUTF8), is not RFC 8259 JSON (ClassNotJSON; a byte-order mark
// counts as not JSON, as for encoding/json), is not an object
// (ClassNotObject), has the number field more than once at the top level
// (ClassDuplicateField), or the field holds anything but null or a valid
// number (ClassInvalidNumber).
//
// A valid number is an int64 in 0..2^63-1 written as a JSON integer (123)
// or as a JSON string of its decimal digits ("123"; escapes such as
// "\u0031" are decoded first). Signs, fractions, exponents, empty strings,
// and leading zeros ("007"; "0" itself is fine) are invalid, because a
// number the worker did not write in canonical form is more likely a
// different identifier than one of ours. If Config.Valid is set, it vets
// the number too.
//
// Only top-level keys are compared, after unescaping. A field that is null
// is treated like one that is absent, and AppendNumbered replaces the null.
func (c *Codec) Inspect(value []byte) Inspection {
	if len(value) > c.maxBytes {
		return Inspection{class: ClassTooLarge, at: c.maxBytes,
			msg: "value is larger than the configured limit (MaxBytes); it was not scanned"}
	}
	// Set field by field: a composite literal is built aside and copied
	// in, and that copy's wide loads of the narrow stores just made stall
	// (store forwarding), a few percent of an inspection.
	var s scanner
	s.data, s.field, s.maxDepth, s.maxElems = value, c.field, c.maxDepth, c.maxElems
	return c.inspection(value, s.scan(), &s.scanResult)
}

// inspection is the Inspection of value from its scan: ok, and what the
// scan found, r.
func (c *Codec) inspection(value []byte, ok bool, r *scanResult) Inspection {
	if !ok {
		return Inspection{class: r.class, at: r.errAt, msg: r.msg}
	}
	if r.dupAt != 0 {
		return Inspection{field: c.field, class: ClassDuplicateField, at: r.dupAt,
			msg: "appears more than once at the top level; keep one"}
	}
	if r.keyAt == 0 {
		return Inspection{Kind: NeedsNumber, size: len(value), insertAt: r.insertAt, empty: r.members == 0}
	}
	return c.inspectNumber(value, r.valStart, r.valEnd, r.valEsc)
}

// inspectNumber is the Inspection of value whose number field's value is
// value[start:end], a string with escapes if esc.
func (c *Codec) inspectNumber(value []byte, start, end int, esc bool) Inspection {
	v := value[start:end]
	var (
		n   int64
		msg string
	)
	switch v[0] {
	case 'n':
		return Inspection{Kind: NeedsNumber, size: len(value), replace: true, repAt: start, repEnd: end}
	case '"':
		n, msg = parseDigitString(v[1:len(v)-1], esc)
	case 't', 'f', '{', '[':
		msg = "holds " + typeName(v[0]) + ", want a string of decimal digits, an integer or null"
	default:
		n, msg = parseDigits(v)
	}
	if msg != "" {
		return Inspection{field: c.field, class: ClassInvalidNumber, at: start, msg: msg}
	}
	if c.valid != nil {
		if err := c.valid(n); err != nil {
			return Inspection{field: c.field, class: ClassInvalidNumber, at: start,
				msg: "number rejected by the configured check", cause: err}
		}
	}
	return Inspection{Kind: HasNumber, Number: n, size: len(value), replace: true, repAt: start, repEnd: end}
}

func typeName(c byte) string {
	switch c {
	case 't', 'f':
		return "a boolean"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 'n':
		return "null"
	}
	return "a number"
}

// parseDigits parses b as a canonical decimal int64 in 0..2^63-1. It returns
// a non-empty reason when b is anything else.
func parseDigits(b []byte) (int64, string) {
	switch {
	case len(b) == 0:
		return 0, "holds an empty string, want decimal digits"
	case b[0] == '-':
		return 0, "holds a negative number, want 0..9223372036854775807"
	case b[0] == '0' && len(b) > 1:
		return 0, "has a leading zero, want canonical decimal digits"
	}
	var n uint64
	for _, c := range b {
		d := c - '0'
		if d > 9 {
			if c == '.' || c == 'e' || c == 'E' {
				return 0, "holds a fraction or exponent, want an integer"
			}
			return 0, "holds something other than decimal digits"
		}
		if n > (math.MaxInt64-uint64(d))/10 {
			return 0, "holds a number above 9223372036854775807"
		}
		n = n*10 + uint64(d)
	}
	return int64(n), ""
}

// maxEscapedDigits bounds the content of a string holding the largest
// number with every digit escaped as \u003X.
const maxEscapedDigits = 19 * len(`\u0039`)

// parseDigitString parses the content of a JSON string as parseDigits does,
// unescaping it first (on the stack) if it has escapes.
func parseDigitString(raw []byte, escaped bool) (int64, string) {
	if !escaped {
		return parseDigits(raw)
	}
	if len(raw) > maxEscapedDigits {
		return 0, "holds a string too long to be a number"
	}
	var buf [maxEscapedDigits]byte
	return parseDigits(appendUnescaped(buf[:0], raw))
}

// RecordNumber finds the number of a numbered record: its HeaderNumber
// header when it has one (header, hasHeader: the last such header's value),
// else the field of its JSON value, either as ParseNumber reads it. A
// header that is present but bad does not fall back to the field, since it
// means the record is not what it claims to be.
func RecordNumber(header []byte, hasHeader bool, value []byte, field string) (int64, bool) {
	if !hasHeader {
		raw, ok, err := Field(value, field)
		if err != nil || !ok {
			return 0, false
		}
		header = raw
	}
	n, err := ParseNumber(header)
	return n, err == nil
}

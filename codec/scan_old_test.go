package codec

// The scanner as it was before it became one loop over the tokens: a
// recursive descent, a method call per token. It is kept here as the
// oracle that FuzzScanEquivalent holds the scanner to: the same verdict,
// offsets and messages for every input.

import (
	"bytes"
	"cmp"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// oldScanner validates one value as RFC 8259 JSON in valid UTF-8 and, at the
// top level, finds the members named field. It makes one pass and does not
// allocate.
//
// Offsets of found things are 0 when not found: no top-level member can
// start at byte 0, which the '{' holds.
type oldScanner struct {
	data  []byte
	pos   int
	depth int
	field string

	// The limits on the work of one value: nesting depth (the top-level
	// object is level 1) and elements (every value below the top level,
	// array items and member values alike).
	maxDepth, maxElems int
	elems              int

	scanResult
}

// fail records a syntax error at byte at and returns false. Invalid UTF-8
// outranks a syntax error wherever it is: everything before at has been
// checked (strings rune by rune, everything else is ASCII), so only the rest
// needs a look, and then only on this bad path. That keeps a value's class
// independent of where the oldScanner happened to stop.
func (s *oldScanner) fail(at int, msg string) bool { return s.failAs(ClassNotJSON, at, msg) }

// failAs is fail for a problem of class, such as a limit reached at byte at.
func (s *oldScanner) failAs(class Class, at int, msg string) bool {
	return s.scanResult.failAs(s.data, class, at, msg)
}

// count counts the value at s.pos as an element (unless it is the
// top-level value); false when it is one too many.
func (s *oldScanner) count() bool {
	if s.depth == 0 {
		return true
	}
	if s.elems++; s.elems > s.maxElems {
		return s.failAs(ClassTooManyElements, s.pos, "more than "+strconv.Itoa(s.maxElems)+" elements (values at every level); the limit is Config.MaxElements")
	}
	return true
}

func (s *oldScanner) skipWS() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// scan validates the whole value and the top-level object's members.
func (s *oldScanner) scan() bool {
	s.skipWS()
	if s.pos >= len(s.data) {
		return s.fail(s.pos, "empty value, want a json object")
	}
	start := s.pos
	if s.data[s.pos] == '{' {
		if !s.topObject() {
			return false
		}
	} else if !s.value() {
		// A non-object is still scanned to its end, so that "[1," is
		// not_json and "[1]" is not_object.
		return false
	}
	s.skipWS()
	if s.pos < len(s.data) {
		return s.fail(s.pos, "unexpected data after the top-level value")
	}
	if s.data[start] != '{' {
		s.class, s.errAt, s.msg = ClassNotObject, start, "top-level value is not an object"
		return false
	}
	return true
}

// topObject scans the top-level object, the only one whose keys are
// compared with field: a key of the same name in a nested object or inside a
// string is data, not the number.
func (s *oldScanner) topObject() bool {
	data := s.data
	s.depth = 1
	s.pos++
	s.insertAt = s.pos
	s.skipWS()
	if s.pos < len(data) && data[s.pos] == '}' {
		s.pos++
		return true
	}
	for {
		keyAt := s.pos
		if s.pos >= len(data) || data[s.pos] != '"' {
			return s.fail(s.pos, "want a string key in object")
		}
		esc, ok := s.str()
		if !ok {
			return false
		}
		key := data[keyAt+1 : s.pos-1]
		var match bool
		if esc {
			match = unescapedEqual(key, s.field)
		} else {
			match = string(key) == s.field
		}
		s.skipWS()
		if s.pos >= len(data) || data[s.pos] != ':' {
			return s.fail(s.pos, "want ':' after object key")
		}
		s.pos++
		s.skipWS()
		valStart := s.pos
		if s.pos < len(data) && data[s.pos] == '"' {
			if !s.count() {
				return false
			}
			esc, ok = s.str()
		} else {
			esc, ok = false, s.value()
		}
		if !ok {
			return false
		}
		if match {
			if s.keyAt == 0 {
				s.keyAt, s.valStart, s.valEnd, s.valEsc = keyAt, valStart, s.pos, esc
			} else if s.dupAt == 0 {
				s.dupAt = keyAt
			}
		}
		s.members++
		s.insertAt = s.pos
		s.skipWS()
		if s.pos >= len(data) {
			return s.fail(s.pos, "unexpected end of input in object, want ',' or '}'")
		}
		switch data[s.pos] {
		case ',':
			s.pos++
			s.skipWS()
		case '}':
			s.pos++
			return true
		default:
			return s.fail(s.pos, "want ',' or '}' after object member")
		}
	}
}

// value scans any JSON value starting at s.pos.
func (s *oldScanner) value() bool {
	data := s.data
	if s.pos >= len(data) {
		return s.fail(s.pos, "unexpected end of input, want a value")
	}
	if !s.count() {
		return false
	}
	switch c := data[s.pos]; c {
	case '{':
		return s.object()
	case '[':
		return s.array()
	case '"':
		_, ok := s.str()
		return ok
	case 't':
		return s.literal("true")
	case 'f':
		return s.literal("false")
	case 'n':
		return s.literal("null")
	default:
		if c == '-' || c-'0' <= 9 {
			return s.number()
		}
	}
	return s.fail(s.pos, "invalid character, want a value")
}

func (s *oldScanner) literal(lit string) bool {
	for i := 0; i < len(lit); i++ {
		if s.pos >= len(s.data) || s.data[s.pos] != lit[i] {
			return s.fail(s.pos, "invalid literal, want true, false or null")
		}
		s.pos++
	}
	return true
}

// number scans the number at s.pos.
func (s *oldScanner) number() bool {
	end, msg := numberEnd(s.data, s.pos)
	if msg != "" {
		return s.fail(end, msg)
	}
	s.pos = end
	return true
}

// str scans the string whose quote is at s.pos, leaves s.pos after its
// closing quote, and says whether it holds escapes (whether its content must
// be unescaped before use).
func (s *oldScanner) str() (escaped, ok bool) {
	data := s.data
	i := s.pos + 1
	for {
		for i < len(data) && strSafe[data[i]] {
			i++
		}
		if i >= len(data) {
			return false, s.fail(i, "unterminated string")
		}
		switch c := data[i]; {
		case c == '"':
			s.pos = i + 1
			return escaped, true
		case c == '\\':
			escaped = true
			if i+1 >= len(data) {
				return false, s.fail(i+1, "unterminated string")
			}
			switch data[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if hex4(data[i+2:]) < 0 {
					return false, s.fail(i, `invalid \u escape, want four hex digits`)
				}
				i += 6
			default:
				return false, s.fail(i, "invalid escape in string")
			}
		case c < 0x20:
			return false, s.fail(i, "control character in string, want it escaped")
		default:
			r, size := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && size == 1 {
				s.class, s.errAt, s.msg = ClassInvalidUTF8, i, "invalid utf-8 sequence in string"
				return false, false
			}
			i += size
		}
	}
}

// enter opens the array or object at s.pos, whose closing byte is closer:
// it counts the nesting depth and reports whether the container is empty
// (closed at once), in which case it is consumed whole.
func (s *oldScanner) enter(closer byte) (empty, ok bool) {
	if s.depth++; s.depth > s.maxDepth {
		return false, s.failAs(ClassTooDeep, s.pos, "nested deeper than "+strconv.Itoa(s.maxDepth)+" levels; the limit is Config.MaxDepth")
	}
	s.pos++
	s.skipWS()
	if s.pos < len(s.data) && s.data[s.pos] == closer {
		s.pos++
		s.depth--
		return true, true
	}
	return false, true
}

// next reads what follows a member of an array or object: a ',' (another
// member follows: more) or closer (the container ends). atEnd and bad are
// the messages for the end of the input and for any other byte.
func (s *oldScanner) next(closer byte, atEnd, bad string) (more, ok bool) {
	s.skipWS()
	if s.pos >= len(s.data) {
		return false, s.fail(s.pos, atEnd)
	}
	switch s.data[s.pos] {
	case ',':
		s.pos++
		s.skipWS()
		return true, true
	case closer:
		s.pos++
		s.depth--
		return false, true
	}
	return false, s.fail(s.pos, bad)
}

func (s *oldScanner) array() bool {
	if empty, ok := s.enter(']'); empty || !ok {
		return ok
	}
	for {
		if !s.value() {
			return false
		}
		if more, ok := s.next(']', "unexpected end of input in array, want ',' or ']'", "want ',' or ']' after array element"); !more || !ok {
			return ok
		}
	}
}

func (s *oldScanner) object() bool {
	if empty, ok := s.enter('}'); empty || !ok {
		return ok
	}
	data := s.data
	for {
		if s.pos >= len(data) || data[s.pos] != '"' {
			return s.fail(s.pos, "want a string key in object")
		}
		if _, ok := s.str(); !ok {
			return false
		}
		s.skipWS()
		if s.pos >= len(data) || data[s.pos] != ':' {
			return s.fail(s.pos, "want ':' after object key")
		}
		s.pos++
		s.skipWS()
		if !s.value() {
			return false
		}
		if more, ok := s.next('}', "unexpected end of input in object, want ',' or '}'", "want ',' or '}' after object member"); !more || !ok {
			return ok
		}
	}
}

// oldInspect is Codec.Inspect over oldScanner.
func (c *Codec) oldInspect(value []byte) Inspection {
	if len(value) > c.maxBytes {
		return c.Inspect(value) // not scanned
	}
	s := oldScanner{data: value, field: c.field, maxDepth: c.maxDepth, maxElems: c.maxElems}
	return c.inspection(value, s.scan(), &s.scanResult)
}

// FuzzScanEquivalent holds the scanner to oldScanner, the recursive one it
// replaced, on arbitrary bytes and field names. Invariants, for several
// limits of depth and elements (one deeper than the 64 levels the scanner
// keeps in a word, one with Field's limits):
//   - both scanners agree on every result: verdict, class, offset and
//     message of the error, and every position they found (members, where
//     a member goes, the field's key and value, a duplicate);
//   - Inspect returns exactly what the old Inspect returns, so the DLQ
//     class and message of a bad value are the same;
//   - a value needing a number is numbered byte for byte as before.
func FuzzScanEquivalent(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s), "order_no")
	}
	f.Add([]byte(`{"a":[[[[{"b":[1,{"c":null}]}]]]],"a":1}`), "a")
	f.Add([]byte(strings.Repeat("[", 70)+strings.Repeat("]", 70)), "")
	f.Add([]byte(`{"x":`+strings.Repeat(`{"y":[`, 40)+strings.Repeat(`]}`, 40)+`}`), "x")
	limits := []Config{{}, {MaxDepth: 3, MaxElements: 8}, {MaxDepth: 1, MaxElements: 1}, {MaxDepth: 200, MaxElements: 500}}
	f.Fuzz(func(t *testing.T, value []byte, field string) {
		checkScanEquivalent(t, value, field, maxDepth, math.MaxInt)
		if !utf8.ValidString(field) {
			return
		}
		for _, cfg := range limits {
			cfg.Field = field
			checkScanEquivalent(t, value, field, cmp.Or(cfg.MaxDepth, DefaultMaxDepth), cmp.Or(cfg.MaxElements, DefaultMaxElements))
			c := mustNew(t, cfg)
			got, want := c.Inspect(value), c.oldInspect(value)
			if got != want {
				t.Fatalf("Inspect(%q) with %+v = %+v, the old Inspect %+v", value, cfg, got, want)
			}
			if got.Kind == NeedsNumber {
				id := int64(len(value)) * 1000003
				if a, b := c.AppendNumbered(nil, value, got, id), c.AppendNumbered(nil, value, want, id); !bytes.Equal(a, b) {
					t.Fatalf("numbered %q = %q, before %q", value, a, b)
				}
			}
		}
	})
}

func checkScanEquivalent(t *testing.T, value []byte, field string, depth, elems int) {
	t.Helper()
	s := scanner{data: value, field: field, maxDepth: depth, maxElems: elems}
	o := oldScanner{data: value, field: field, maxDepth: depth, maxElems: elems}
	ok, wantOK := s.scan(), o.scan()
	got := []any{ok, s.class, s.errAt, s.msg, s.elems}
	want := []any{wantOK, o.class, o.errAt, o.msg, o.elems}
	if ok {
		got = append(got, s.members, s.insertAt, s.keyAt, s.valStart, s.valEnd, s.valEsc, s.dupAt)
		want = append(want, o.members, o.insertAt, o.keyAt, o.valStart, o.valEnd, o.valEsc, o.dupAt)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("scan(%q), field %q, depth %d, elements %d = %v, the old scanner %v", value, field, depth, elems, got, want)
	}
}

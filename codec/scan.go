package codec

import (
	"strconv"
	"unicode/utf8"
)

// maxDepth is encoding/json's nesting limit, the most a scanner ever
// allows (Field's limit). RFC 8259 lets a parser limit depth; Inspect's
// limit is Config.MaxDepth, lower by default.
const maxDepth = 10000

// scanner validates one value as RFC 8259 JSON in valid UTF-8 and, at the
// top level, finds the members named field. It makes one pass and does not
// allocate.
//
// Offsets of found things are 0 when not found: no top-level member can
// start at byte 0, which the '{' holds.
type scanner struct {
	data  []byte
	pos   int
	depth int
	field string

	// The limits on the work of one value: nesting depth (the top-level
	// object is level 1) and elements (every value below the top level,
	// array items and member values alike).
	maxDepth, maxElems int
	elems              int

	members          int  // top-level members seen
	insertAt         int  // end of the last member's value, or just after '{' if none
	keyAt            int  // offset of the field's key
	valStart, valEnd int  // span of the field's value
	valEsc           bool // the field's value is a string with escapes
	dupAt            int  // offset of the field's second key

	class Class // why scanning failed
	errAt int
	msg   string
}

// fail records a syntax error at byte at and returns false. Invalid UTF-8
// outranks a syntax error wherever it is: everything before at has been
// checked (strings rune by rune, everything else is ASCII), so only the rest
// needs a look, and then only on this bad path. That keeps a value's class
// independent of where the scanner happened to stop.
func (s *scanner) fail(at int, msg string) bool { return s.failAs(ClassNotJSON, at, msg) }

// failAs is fail for a problem of class, such as a limit reached at byte at.
func (s *scanner) failAs(class Class, at int, msg string) bool {
	rest := s.data[at:]
	if !utf8.Valid(rest) {
		for i := 0; i < len(rest); {
			r, size := utf8.DecodeRune(rest[i:])
			if r == utf8.RuneError && size == 1 {
				at += i
				break
			}
			i += size
		}
		s.class, s.errAt, s.msg = ClassInvalidUTF8, at, "invalid utf-8 sequence"
		return false
	}
	s.class, s.errAt, s.msg = class, at, msg
	return false
}

// count counts the value at s.pos as an element (unless it is the
// top-level value); false when it is one too many.
func (s *scanner) count() bool {
	if s.depth == 0 {
		return true
	}
	if s.elems++; s.elems > s.maxElems {
		return s.failAs(ClassTooManyElements, s.pos, "more than "+strconv.Itoa(s.maxElems)+" elements (values at every level); the limit is Config.MaxElements")
	}
	return true
}

func (s *scanner) skipWS() {
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
func (s *scanner) scan() bool {
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
func (s *scanner) topObject() bool {
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
func (s *scanner) value() bool {
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

func (s *scanner) literal(lit string) bool {
	for i := 0; i < len(lit); i++ {
		if s.pos >= len(s.data) || s.data[s.pos] != lit[i] {
			return s.fail(s.pos, "invalid literal, want true, false or null")
		}
		s.pos++
	}
	return true
}

// number scans -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?. What follows
// it is the caller's to check, which is how "01" and "1x" fail.
func (s *scanner) number() bool {
	data := s.data
	i := s.pos
	if data[i] == '-' {
		i++
	}
	switch {
	case i < len(data) && data[i] == '0':
		i++
	case i < len(data) && data[i]-'1' <= 8:
		for i++; i < len(data) && data[i]-'0' <= 9; i++ {
		}
	default:
		return s.fail(i, "invalid number, want a digit")
	}
	if i < len(data) && data[i] == '.' {
		i++
		if i >= len(data) || data[i]-'0' > 9 {
			return s.fail(i, "invalid number, want a digit after '.'")
		}
		for i++; i < len(data) && data[i]-'0' <= 9; i++ {
		}
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		if i >= len(data) || data[i]-'0' > 9 {
			return s.fail(i, "invalid number, want a digit in the exponent")
		}
		for i++; i < len(data) && data[i]-'0' <= 9; i++ {
		}
	}
	s.pos = i
	return true
}

// str scans the string whose quote is at s.pos, leaves s.pos after its
// closing quote, and says whether it holds escapes (whether its content must
// be unescaped before use).
func (s *scanner) str() (escaped, ok bool) {
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
func (s *scanner) enter(closer byte) (empty, ok bool) {
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
func (s *scanner) next(closer byte, atEnd, bad string) (more, ok bool) {
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

func (s *scanner) array() bool {
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

func (s *scanner) object() bool {
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

package codec

import (
	"encoding/binary"
	"math/bits"
	"strconv"
	"unicode/utf8"
)

// maxDepth is encoding/json's nesting limit, the most a scanner ever
// allows (Field's limit). RFC 8259 lets a parser limit depth; Inspect's
// limit is Config.MaxDepth, lower by default.
const maxDepth = 10000

// scanner validates one value as RFC 8259 JSON in valid UTF-8 and, at the
// top level, finds the members named field. It makes one pass and does not
// allocate (unless a value nests more than 64 levels below where a scan
// of nested values starts, which Inspect's default MaxDepth rules out).
//
// Its cost is per token more than per byte, because the strings of an
// order event are short. So the scan is one loop over the tokens with the
// position in a local variable, not a method call per token with the
// position in the struct: a nested value is scanned iteratively, with a bit
// a level saying whether that level is an object or an array, and the
// common tokens (a string of plain ASCII, no whitespace) take the shortest
// path. What it accepts, and the class, offset and message of every error,
// are those of the straightforward recursive scanner it replaced (kept in
// the tests as the oracle it is fuzzed against).
//
// Offsets of found things are 0 when not found: no top-level member can
// start at byte 0, which the '{' holds.
type scanner struct {
	data  []byte
	depth int // the depth of the container being scanned; the top-level object is 1
	field string

	// The limits on the work of one value: nesting depth (the top-level
	// object is level 1) and elements (every value below the top level,
	// array items and member values alike).
	maxDepth, maxElems int
	elems              int

	scanResult
}

// scanResult is what a scan of a value found.
type scanResult struct {
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

// The messages of the syntax errors that more than one place reports.
const (
	msgWantKey        = "want a string key in object"
	msgWantColon      = "want ':' after object key"
	msgObjectEnd      = "unexpected end of input in object, want ',' or '}'"
	msgObjectNext     = "want ',' or '}' after object member"
	msgArrayEnd       = "unexpected end of input in array, want ',' or ']'"
	msgArrayNext      = "want ',' or ']' after array element"
	msgValueEnd       = "unexpected end of input, want a value"
	msgUnterminated   = "unterminated string"
	msgInvalidLiteral = "invalid literal, want true, false or null"
)

// fail records a syntax error at byte at and returns false. Invalid UTF-8
// outranks a syntax error wherever it is: everything before at has been
// checked (strings rune by rune, everything else is ASCII), so only the rest
// needs a look, and then only on this bad path. That keeps a value's class
// independent of where the scanner happened to stop.
func (s *scanner) fail(at int, msg string) bool { return s.failAs(ClassNotJSON, at, msg) }

// failAs is fail for a problem of class, such as a limit reached at byte at.
func (s *scanner) failAs(class Class, at int, msg string) bool {
	return s.scanResult.failAs(s.data, class, at, msg)
}

// failAs records the error of class at byte at of data, or invalid UTF-8
// in data at or after at, which outranks it, and returns false.
func (s *scanResult) failAs(data []byte, class Class, at int, msg string) bool {
	rest := data[at:]
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

// tooMany fails on the element at byte at, one more than maxElems.
func (s *scanner) tooMany(at int) bool {
	return s.failAs(ClassTooManyElements, at, "more than "+strconv.Itoa(s.maxElems)+" elements (values at every level); the limit is Config.MaxElements")
}

// tooDeep fails on the array or object opened at byte at.
func (s *scanner) tooDeep(at int) bool {
	return s.failAs(ClassTooDeep, at, "nested deeper than "+strconv.Itoa(s.maxDepth)+" levels; the limit is Config.MaxDepth")
}

// skipWS returns the offset of the first byte at or after i that is not
// JSON whitespace. Between the tokens of most events there is none, which
// the first comparison settles.
func skipWS(data []byte, i int) int {
	for i < len(data) && data[i] <= ' ' && (data[i] == ' ' || data[i] == '\n' || data[i] == '\t' || data[i] == '\r') {
		i++
	}
	return i
}

// scan validates the whole value and the top-level object's members.
func (s *scanner) scan() bool {
	data := s.data
	i := skipWS(data, 0)
	if i >= len(data) {
		return s.fail(i, "empty value, want a json object")
	}
	start := i
	var ok bool
	if data[i] == '{' {
		i, ok = s.topObject(i)
	} else {
		// A non-object is still scanned to its end, so that "[1," is
		// not_json and "[1]" is not_object.
		i, ok = s.value(i)
	}
	if !ok {
		return false
	}
	i = skipWS(data, i)
	if i < len(data) {
		return s.fail(i, "unexpected data after the top-level value")
	}
	if data[start] != '{' {
		s.class, s.errAt, s.msg = ClassNotObject, start, "top-level value is not an object"
		return false
	}
	return true
}

// topObject scans the top-level object whose '{' is at i, the only one
// whose keys are compared with field: a key of the same name in a nested
// object or inside a string is data, not the number. It returns the offset
// after the object.
func (s *scanner) topObject(i int) (int, bool) {
	data := s.data
	s.depth = 1
	i++
	s.insertAt = i
	i = skipWS(data, i)
	if i < len(data) && data[i] == '}' {
		return i + 1, true
	}
	for {
		keyAt := i
		if i >= len(data) || data[i] != '"' {
			return i, s.fail(i, msgWantKey)
		}
		// A string's common case, written out here and wherever a
		// string is scanned: a call per string is a good part of the
		// scan's cost.
		end, esc, ok := plainRun(data, i+1), false, true
		if end < len(data) && data[end] == '"' {
			end++
		} else if end, esc, ok = s.strRest(end); !ok {
			return end, false
		}
		key := data[keyAt+1 : end-1]
		var match bool
		if esc {
			match = unescapedEqual(key, s.field)
		} else {
			match = string(key) == s.field
		}
		if i = end; i >= len(data) || data[i] != ':' {
			if i = skipWS(data, i); i >= len(data) || data[i] != ':' {
				return i, s.fail(i, msgWantColon)
			}
		}
		i = skipWS(data, i+1)
		valStart := i
		esc = false
		if i < len(data) && data[i] == '"' {
			if s.elems++; s.elems > s.maxElems {
				return i, s.tooMany(i)
			}
			if i = plainRun(data, i+1); i < len(data) && data[i] == '"' {
				i++
			} else {
				i, esc, ok = s.strRest(i)
			}
		} else {
			i, ok = s.value(i)
		}
		if !ok {
			return i, false
		}
		if match {
			if s.keyAt == 0 {
				s.keyAt, s.valStart, s.valEnd, s.valEsc = keyAt, valStart, i, esc
			} else if s.dupAt == 0 {
				s.dupAt = keyAt
			}
		}
		s.members++
		s.insertAt = i
		i = skipWS(data, i)
		if i >= len(data) {
			return i, s.fail(i, msgObjectEnd)
		}
		switch data[i] {
		case ',':
			i = skipWS(data, i+1)
		case '}':
			return i + 1, true
		default:
			return i, s.fail(i, msgObjectNext)
		}
	}
}

// value scans the value at i, arrays and objects with all they hold, in
// the container at s.depth (0: the value is the top-level value, which is
// not counted as an element), and returns the offset after it.
//
// The nesting below s.depth is a stack of bits, one a level, 1 for an
// object: the first 64 levels in a word, deeper ones (only where MaxDepth
// allows more than 64) in a slice.
func (s *scanner) value(i int) (int, bool) {
	data := s.data
	base := s.depth
	depth := base
	var (
		objects uint64   // bit k: level base+1+k is an object
		deeper  []uint64 // the same for levels from base+65 on
		inObj   bool     // the innermost open container is an object
		ok      bool
	)

value: // a value starts at i, inside the container at depth
	if i >= len(data) {
		return i, s.fail(i, msgValueEnd)
	}
	if depth != 0 {
		if s.elems++; s.elems > s.maxElems {
			return i, s.tooMany(i)
		}
	}
	switch c := data[i]; c {
	case '{', '[':
		if depth++; depth > s.maxDepth {
			return i, s.tooDeep(i)
		}
		inObj = c == '{'
		setLevel(&objects, &deeper, depth-base-1, inObj)
		i = skipWS(data, i+1)
		if i < len(data) && data[i] == c+2 { // ']' is '['+2, '}' is '{'+2
			i++
			depth--
			inObj = depth > base && isObject(objects, deeper, depth-base-1)
			goto after
		}
		if c == '{' {
			goto key
		}
		goto value
	default:
		if i, ok = s.scalar(i, c); !ok {
			return i, false
		}
	}

after: // a value ended at i, inside the container at depth
	if depth == base {
		return i, true
	}
	i = skipWS(data, i)
	if i >= len(data) {
		if inObj {
			return i, s.fail(i, msgObjectEnd)
		}
		return i, s.fail(i, msgArrayEnd)
	}
	switch c := data[i]; {
	case c == ',':
		i = skipWS(data, i+1)
		if inObj {
			goto key
		}
		goto value
	case c == '}' && inObj, c == ']' && !inObj:
		i++
		depth--
		inObj = depth > base && isObject(objects, deeper, depth-base-1)
		goto after
	case inObj:
		return i, s.fail(i, msgObjectNext)
	default:
		return i, s.fail(i, msgArrayNext)
	}

key: // a member's key starts at i, inside the object at depth
	if i, ok = s.key(i); !ok {
		return i, false
	}
	goto value
}

// setLevel records whether nesting level k (counted from the scan's base)
// is an object: the first 64 levels in the word, deeper ones in the slice.
func setLevel(objects *uint64, deeper *[]uint64, k int, obj bool) {
	if k < 64 {
		*objects = *objects&^(1<<k) | b2u(obj)<<k
		return
	}
	*deeper = setBit(*deeper, k-64, obj)
}

// scalar scans the string, literal or number at i, whose first byte is c,
// and returns the offset after it.
func (s *scanner) scalar(i int, c byte) (int, bool) {
	data := s.data
	switch c {
	case '"':
		if i = plainRun(data, i+1); i < len(data) && data[i] == '"' {
			return i + 1, true
		}
		i, _, ok := s.strRest(i)
		return i, ok
	case 't':
		return s.literal(i, "true")
	case 'f':
		return s.literal(i, "false")
	case 'n':
		return s.literal(i, "null")
	}
	if c != '-' && c-'0' > 9 {
		return i, s.fail(i, "invalid character, want a value")
	}
	return s.number(i)
}

// key scans a member's key at i, its colon and the space after it, and
// returns the offset of the member's value.
func (s *scanner) key(i int) (int, bool) {
	data := s.data
	if i >= len(data) || data[i] != '"' {
		return i, s.fail(i, msgWantKey)
	}
	if i = plainRun(data, i+1); i < len(data) && data[i] == '"' {
		i++
	} else {
		var ok bool
		if i, _, ok = s.strRest(i); !ok {
			return i, false
		}
	}
	if i >= len(data) || data[i] != ':' {
		if i = skipWS(data, i); i >= len(data) || data[i] != ':' {
			return i, s.fail(i, msgWantColon)
		}
	}
	return skipWS(data, i+1), true
}

// literal scans the literal lit expected at i.
func (s *scanner) literal(i int, lit string) (int, bool) {
	data := s.data
	if len(data)-i >= len(lit) && string(data[i:i+len(lit)]) == lit {
		return i + len(lit), true
	}
	for j := 0; j < len(lit); j++ {
		if i >= len(data) || data[i] != lit[j] {
			break
		}
		i++
	}
	return i, s.fail(i, msgInvalidLiteral)
}

// number scans the number at i.
func (s *scanner) number(i int) (int, bool) {
	end, msg := numberEnd(s.data, i)
	if msg != "" {
		return end, s.fail(end, msg)
	}
	return end, true
}

// numberEnd returns the offset after the number
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? at i, or where it is
// not one and why. What follows it is the caller's to check, which is how
// "01" and "1x" fail.
func numberEnd(data []byte, i int) (end int, msg string) {
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
		return i, "invalid number, want a digit"
	}
	if i < len(data) && data[i] == '.' {
		i++
		if i >= len(data) || data[i]-'0' > 9 {
			return i, "invalid number, want a digit after '.'"
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
			return i, "invalid number, want a digit in the exponent"
		}
		for i++; i < len(data) && data[i]-'0' <= 9; i++ {
		}
	}
	return i, ""
}

// Bytes of a word, for plainRun.
const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// plainRun returns the offset of the first byte at or after i that a JSON
// string may not hold as it is (a quote, a backslash, a control character)
// or that is not ASCII, or len(data) if there is none: the bytes strSafe
// marks, a word at a time. In each of the word's tests a byte that passes
// can be flagged only above a byte that fails (a borrow carries upward), so
// the lowest flag is always the first byte that fails.
func plainRun(data []byte, i int) int {
	for ; i+8 <= len(data); i += 8 {
		x := binary.LittleEndian.Uint64(data[i:])
		q, b := x^(ones*'"'), x^(ones*'\\')
		m := (q-ones)&^q | (b-ones)&^b | (x-ones*0x20)&^x | x
		if m &= highs; m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
	}
	for i < len(data) && strSafe[data[i]] {
		i++
	}
	return i
}

// strRest scans the rest of a string from i, the first byte that
// plainRun stopped at, and returns the offset after its closing quote and
// whether it holds escapes (whether its content must be unescaped before
// use). A string of plain ASCII, most of an order event's, never gets
// here: the scan reads it with plainRun and finds its quote.
func (s *scanner) strRest(i int) (end int, escaped, ok bool) {
	data := s.data
	for {
		i = plainRun(data, i)
		if i >= len(data) {
			return i, false, s.fail(i, msgUnterminated)
		}
		switch c := data[i]; {
		case c == '"':
			return i + 1, escaped, true
		case c == '\\':
			escaped = true
			if i+1 >= len(data) {
				return i + 1, false, s.fail(i+1, msgUnterminated)
			}
			switch data[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if hex4(data[i+2:]) < 0 {
					return i, false, s.fail(i, `invalid \u escape, want four hex digits`)
				}
				i += 6
			default:
				return i, false, s.fail(i, "invalid escape in string")
			}
		case c < 0x20:
			return i, false, s.fail(i, "control character in string, want it escaped")
		default:
			r, size := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && size == 1 {
				s.class, s.errAt, s.msg = ClassInvalidUTF8, i, "invalid utf-8 sequence in string"
				return i, false, false
			}
			i += size
		}
	}
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// setBit sets bit k of bits to v, growing bits as needed.
func setBit(bits []uint64, k int, v bool) []uint64 {
	for len(bits) <= k/64 {
		bits = append(bits, 0)
	}
	bits[k/64] = bits[k/64]&^(1<<(k%64)) | b2u(v)<<(k%64)
	return bits
}

// isObject reports whether level k of value's stack (objects, then
// deeper) is an object.
func isObject(objects uint64, deeper []uint64, k int) bool {
	if k < 64 {
		return objects>>k&1 != 0
	}
	k -= 64
	return deeper[k/64]>>(k%64)&1 != 0
}

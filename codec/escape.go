package codec

import (
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// strSafe[c] is true for the ASCII bytes a JSON string may hold unescaped.
// The scanner and the encoder skip runs of them with one table lookup per
// byte, which is most of every order event.
var strSafe = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

const hexDigits = "0123456789abcdef"

// hexVal returns the value of the hex digit c, or -1.
func hexVal(c byte) rune {
	switch {
	case '0' <= c && c <= '9':
		return rune(c - '0')
	case 'a' <= c && c <= 'f':
		return rune(c - 'a' + 10)
	case 'A' <= c && c <= 'F':
		return rune(c - 'A' + 10)
	}
	return -1
}

// hex4 decodes the four hex digits of a \u escape, or returns -1.
func hex4(b []byte) rune {
	if len(b) < 4 {
		return -1
	}
	var r rune
	for _, c := range b[:4] {
		v := hexVal(c)
		if v < 0 {
			return -1
		}
		r = r<<4 | v
	}
	return r
}

// nextChar decodes the character at raw[i] of a string's content that the
// scanner has already validated, and returns it with the index after it.
//
// Surrogates follow encoding/json's Unmarshal, so a key means the same thing
// here as in every Go consumer: a valid \uD8xx\uDCxx pair is one rune, and a
// lone or mismatched surrogate escape decodes to U+FFFD, consuming only its
// own six bytes.
func nextChar(raw []byte, i int) (rune, int) {
	c := raw[i]
	if c != '\\' {
		if c < utf8.RuneSelf {
			return rune(c), i + 1
		}
		r, size := utf8.DecodeRune(raw[i:])
		return r, i + size
	}
	switch raw[i+1] {
	case 'b':
		return '\b', i + 2
	case 'f':
		return '\f', i + 2
	case 'n':
		return '\n', i + 2
	case 'r':
		return '\r', i + 2
	case 't':
		return '\t', i + 2
	case 'u':
		r := hex4(raw[i+2:])
		i += 6
		if utf16.IsSurrogate(r) {
			if len(raw) >= i+6 && raw[i] == '\\' && raw[i+1] == 'u' {
				if dec := utf16.DecodeRune(r, hex4(raw[i+2:])); dec != unicode.ReplacementChar {
					return dec, i + 6
				}
			}
			return unicode.ReplacementChar, i
		}
		return r, i
	}
	// '"', '\\' and '/' stand for themselves.
	return rune(raw[i+1]), i + 2
}

// unescapedEqual reports whether the validated string content raw, once
// unescaped, equals want. It compares as it decodes, so matching an escaped
// key costs no allocation.
func unescapedEqual(raw []byte, want string) bool {
	var buf [utf8.UTFMax]byte
	j := 0
	for i := 0; i < len(raw); {
		if raw[i] != '\\' {
			if j >= len(want) || raw[i] != want[j] {
				return false
			}
			i++
			j++
			continue
		}
		var r rune
		r, i = nextChar(raw, i)
		enc := utf8.AppendRune(buf[:0], r)
		if len(want)-j < len(enc) || string(enc) != want[j:j+len(enc)] {
			return false
		}
		j += len(enc)
	}
	return j == len(want)
}

// appendUnescaped appends the unescaped form of the validated string content
// raw to dst.
func appendUnescaped(dst, raw []byte) []byte {
	for i := 0; i < len(raw); {
		if raw[i] != '\\' {
			dst = append(dst, raw[i])
			i++
			continue
		}
		var r rune
		r, i = nextChar(raw, i)
		dst = utf8.AppendRune(dst, r)
	}
	return dst
}

// appendJSONString appends s to dst as a quoted JSON string. It escapes only
// what RFC 8259 requires, and writes invalid UTF-8 as \ufffd (as
// encoding/json does), so the output is always valid JSON in valid UTF-8.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if strSafe[c] {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r != utf8.RuneError || size != 1 {
				i += size
				continue
			}
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		i++
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

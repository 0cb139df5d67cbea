package codec

import (
	"bytes"
	"encoding/json"
	"math"
	"regexp"
	"strconv"
	"testing"
	"unicode/utf8"
)

// verdict is how a value should be classified, worked out by oracle.
type verdict struct {
	kind   Kind
	class  Class
	number int64
}

var canonicalDigits = regexp.MustCompile(`^(0|[1-9][0-9]*)$`)

// oracle classifies value with the standard library alone (utf8.Valid,
// json.Valid and json.Decoder), independently of the scanner, so tests and
// fuzz targets can check Inspect against it.
func oracle(t testing.TB, value []byte, field string, maxBytes int) verdict {
	t.Helper()
	switch {
	case len(value) > maxBytes:
		return verdict{class: ClassTooLarge}
	case !utf8.Valid(value):
		return verdict{class: ClassInvalidUTF8}
	case !json.Valid(value):
		return verdict{class: ClassNotJSON}
	case bytes.TrimLeft(value, " \t\r\n")[0] != '{':
		return verdict{class: ClassNotObject}
	}
	dec := json.NewDecoder(bytes.NewReader(value))
	if _, err := dec.Token(); err != nil {
		t.Fatalf("oracle: json.Valid accepted %q, but the decoder says %v", value, err)
	}
	var first json.RawMessage
	count := 0
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("oracle: key of %q: %v", value, err)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			t.Fatalf("oracle: value of %q: %v", value, err)
		}
		if tok.(string) == field {
			if count == 0 {
				first = raw
			}
			count++
		}
	}
	switch {
	case count > 1:
		return verdict{class: ClassDuplicateField}
	case count == 0 || string(first) == "null":
		return verdict{kind: NeedsNumber}
	}
	digits := string(first)
	if first[0] == '"' {
		if err := json.Unmarshal(first, &digits); err != nil {
			t.Fatalf("oracle: string %s: %v", first, err)
		}
	}
	if canonicalDigits.MatchString(digits) {
		if n, err := strconv.ParseInt(digits, 10, 64); err == nil {
			return verdict{kind: HasNumber, number: n}
		}
	}
	return verdict{class: ClassInvalidNumber}
}

// checkInspect fails t if Inspect disagrees with oracle on value.
func checkInspect(t testing.TB, c *Codec, value []byte) Inspection {
	t.Helper()
	want := oracle(t, value, c.FieldName(), c.MaxBytes())
	// The oracle knows no limits on depth and elements: it is the verdict
	// of the same codec with encoding/json's depth and no element limit.
	free := *c
	free.maxDepth, free.maxElems = maxDepth, math.MaxInt
	unlimited := free.Inspect(value)
	if unlimited.Class() == ClassTooDeep && want.class == ClassNotJSON {
		want.class = ClassTooDeep // encoding/json's own depth limit, which it calls invalid
	}
	if got := (verdict{kind: unlimited.Kind, class: unlimited.Class(), number: unlimited.Number}); got != want {
		t.Fatalf("Inspect(%q) without limits = %+v (%v), want %+v", value, got, unlimited.Err(), want)
	}
	in := c.Inspect(value)
	got := verdict{kind: in.Kind, class: in.Class(), number: in.Number}
	switch lim := limitOracle(value, c.maxDepth, c.maxElems); {
	case lim != "" && (want.class == "" || want.class == ClassNotObject || want.class == ClassDuplicateField || want.class == ClassInvalidNumber):
		// Valid JSON over a limit: the limit it reaches first in reading
		// order.
		want = verdict{class: lim}
	case (got.class == ClassTooDeep || got.class == ClassTooManyElements) && want.class == ClassNotJSON:
		// A limit reached before the syntax error, which the scan never
		// got to.
		if in.at > unlimited.at {
			t.Fatalf("Inspect(%q) = %s at byte %d, after the syntax error at %d", value, got.class, in.at, unlimited.at)
		}
		want = got
	}
	if got != want {
		t.Fatalf("Inspect(%q) = %+v (%v), want %+v", value, got, in.Err(), want)
	}
	return in
}

// limitOracle walks a value that encoding/json accepts (on anything else it
// returns "") with encoding/json's tokenizer and returns the limit the
// value reaches first in reading order: too_deep when a container opens
// below level maxDepth (the top-level value is level 1), too_many_elements
// at the maxElems+1st value below the top level; "" when it reaches none.
func limitOracle(value []byte, maxDepth, maxElems int) Class {
	if !utf8.Valid(value) || !json.Valid(value) {
		return ""
	}
	dec := json.NewDecoder(bytes.NewReader(value))
	dec.UseNumber()
	type level struct {
		object, wantKey bool
	}
	var stack []level
	elems := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return ""
		}
		isKey := len(stack) > 0 && stack[len(stack)-1].object && stack[len(stack)-1].wantKey
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			if len(stack) > 0 && stack[len(stack)-1].object {
				stack[len(stack)-1].wantKey = true
			}
			continue
		}
		if isKey {
			stack[len(stack)-1].wantKey = false
			continue
		}
		if len(stack) > 0 {
			if elems++; elems > maxElems {
				return ClassTooManyElements
			}
			if stack[len(stack)-1].object {
				stack[len(stack)-1].wantKey = true
			}
		}
		if d, ok := tok.(json.Delim); ok {
			stack = append(stack, level{object: d == '{', wantKey: d == '{'})
			if len(stack) > maxDepth {
				return ClassTooDeep
			}
		}
	}
}

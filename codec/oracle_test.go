package codec

import (
	"bytes"
	"encoding/json"
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
	in := c.Inspect(value)
	got := verdict{kind: in.Kind, class: in.Class(), number: in.Number}
	if got != want {
		t.Fatalf("Inspect(%q) = %+v (%v), want %+v", value, got, in.Err(), want)
	}
	return in
}

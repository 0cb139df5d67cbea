package codec

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"testing"
)

// checkSplice numbers value with id and fails t unless: the bytes already in
// dst are kept; the output is valid JSON; it carries id in the number field,
// read back by Inspect, Field and encoding/json; and value is recovered
// exactly by removing the added member (or by putting the null back).
func checkSplice(t testing.TB, c *Codec, value []byte, insp Inspection, id int64) []byte {
	t.Helper()
	const prefix = "prefix:"
	dst := append(make([]byte, 0, 8), prefix...)
	out := c.AppendNumbered(dst, value, insp, id)
	if !bytes.HasPrefix(out, []byte(prefix)) {
		t.Fatalf("AppendNumbered(%q) overwrote dst: %q", value, out)
	}
	out = out[len(prefix):]
	if want := c.NumberedLen(value, insp, id); len(out) != want {
		t.Errorf("AppendNumbered(%q) wrote %d bytes, NumberedLen says %d", value, len(out), want)
	}
	if !json.Valid(out) {
		t.Fatalf("AppendNumbered(%q) = %q, not valid JSON", value, out)
	}
	// The output may pass MaxBytes, which bounds input, not output; and
	// the number field is one element more than the input had, so an
	// input at MaxElements reads back one over it.
	unlimited := *c
	unlimited.maxBytes = math.MaxInt
	unlimited.maxElems = c.maxElems + 1
	if back := unlimited.Inspect(out); back.Kind != HasNumber || back.Number != id {
		t.Fatalf("Inspect(AppendNumbered(%q)) = %v %d (%v), want has_number %d", value, back.Kind, back.Number, back.Err(), id)
	}
	raw, ok, err := Field(out, c.FieldName())
	if err != nil || !ok || string(raw) != strconv.FormatInt(id, 10) {
		t.Fatalf("Field(%q) = %q, %v, %v; want %d", out, raw, ok, err, id)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatalf("json.Unmarshal(%q): %v", out, err)
	}
	got := string(m[c.FieldName()])
	if c.Format() == FormatString {
		if err := json.Unmarshal(m[c.FieldName()], &got); err != nil {
			t.Fatalf("encoding/json reads %q as %s: %v", out, m[c.FieldName()], err)
		}
	}
	if got != strconv.FormatInt(id, 10) {
		t.Fatalf("encoding/json reads %q as %q, want %d", out, got, id)
	}
	num := c.appendNumber(nil, id)
	var orig map[string]json.RawMessage
	if err := json.Unmarshal(value, &orig); err != nil {
		t.Fatalf("json.Unmarshal(%q): %v", value, err)
	}
	member := c.member
	if len(orig) == 0 {
		member = member[1:] // no comma in an empty object
	}
	if !recovers(value, out, num, member) {
		t.Fatalf("AppendNumbered(%q) = %q: the original is not recoverable by removing the number", value, out)
	}
	return out
}

// recovers reports whether out is value with member+num inserted
// somewhere, or with one "null" replaced by num. It runs in linear time so the fuzz targets can call it on large
// inputs: out[:i] == value[:i] for every i up to the common prefix, and
// likewise for suffixes, so only the middle needs comparing.
func recovers(value, out, num, member []byte) bool {
	prefix := 0
	for prefix < len(value) && prefix < len(out) && value[prefix] == out[prefix] {
		prefix++
	}
	suffix := 0
	for suffix < len(value) && suffix < len(out) && value[len(value)-1-suffix] == out[len(out)-1-suffix] {
		suffix++
	}
	spliced := func(i, removed int, ins []byte) bool {
		return i <= prefix && len(value)-i-removed <= suffix && len(out) == len(value)-removed+len(ins) &&
			bytes.Equal(out[i:i+len(ins)], ins)
	}
	ins := append(append([]byte(nil), member...), num...)
	for i := max(0, len(value)-suffix); i <= min(prefix, len(value)); i++ {
		if spliced(i, 0, ins) {
			return true
		}
	}
	for i := max(0, len(value)-suffix-4); i <= min(prefix, len(value)-4); i++ {
		if string(value[i:i+4]) == "null" && spliced(i, 4, num) {
			return true
		}
	}
	return false
}

func TestAppendNumbered(t *testing.T) {
	str := mustNew(t, Config{})
	num := mustNew(t, Config{Format: FormatNumber})
	odd := mustNew(t, Config{Field: "a\"\\\n\u2028é"})
	tests := []struct {
		name  string
		c     *Codec
		value string
		want  string
	}{
		{"empty", str, `{}`, `{"order_no":"42"}`},
		{"empty number", num, `{}`, `{"order_no":42}`},
		{"empty spaced", str, "{ \n }", "{\"order_no\":\"42\" \n }"},
		{"one member", str, `{"a":1}`, `{"a":1,"order_no":"42"}`},
		{"one member number", num, `{"a":1}`, `{"a":1,"order_no":42}`},
		{"spacing kept", str, "{ \"a\" : 1 \n}", "{ \"a\" : 1,\"order_no\":\"42\" \n}"},
		{"outer whitespace kept", str, " \t{\"a\":[1,2]}\r\n", " \t{\"a\":[1,2],\"order_no\":\"42\"}\r\n"},
		{"pretty", str, "{\n  \"a\": {\"b\": 2},\n  \"c\": \"}\"\n}\n", "{\n  \"a\": {\"b\": 2},\n  \"c\": \"}\",\"order_no\":\"42\"\n}\n"},
		{"nested field", str, `{"x":{"order_no":"1"}}`, `{"x":{"order_no":"1"},"order_no":"42"}`},
		{"null", str, `{"order_no":null}`, `{"order_no":"42"}`},
		{"null number", num, `{"order_no":null}`, `{"order_no":42}`},
		{"null spaced", str, `{ "a":null, "order_no" : null , "b":null }`, `{ "a":null, "order_no" : "42" , "b":null }`},
		{"null escaped key", str, `{"order\u005fno":null}`, `{"order\u005fno":"42"}`},
		{"escaped field name", odd, `{"b":1}`, "{\"b\":1,\"a\\\"\\\\\\n\u2028é\":\"42\"}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			value := []byte(tt.value)
			insp := tt.c.Inspect(value)
			if insp.Kind != NeedsNumber {
				t.Fatalf("Inspect(%q) = %v (%v), want needs_number", value, insp.Kind, insp.Err())
			}
			if got := checkSplice(t, tt.c, value, insp, 42); string(got) != tt.want {
				t.Errorf("AppendNumbered(%q) = %q, want %q", value, got, tt.want)
			}
		})
	}
}

func TestAppendNumberedIDs(t *testing.T) {
	for _, format := range []NumberFormat{FormatString, FormatNumber} {
		c := mustNew(t, Config{Format: format})
		for _, id := range []int64{0, 1, 9, 10, 229710323916801, 1<<63 - 1} {
			for _, v := range []string{`{}`, `{"a":"b"}`, `{"order_no":null}`} {
				checkSplice(t, c, []byte(v), c.Inspect([]byte(v)), id)
			}
		}
	}
}

func TestAppendNumberedPanics(t *testing.T) {
	c := mustNew(t, Config{})
	value := []byte(`{"a":1}`)
	tests := []struct {
		name  string
		value []byte
		insp  Inspection
		id    int64
	}{
		{"bad inspection", []byte(`[]`), c.Inspect([]byte(`[]`)), 1},
		{"has number", []byte(`{"order_no":1}`), c.Inspect([]byte(`{"order_no":1}`)), 1},
		{"zero inspection", value, Inspection{}, 1},
		{"other value", []byte(`{"a":12}`), c.Inspect(value), 1},
		{"negative id", value, c.Inspect(value), -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("AppendNumbered(%q, %+v, %d) did not panic", tt.value, tt.insp, tt.id)
				}
			}()
			c.AppendNumbered(nil, tt.value, tt.insp, tt.id)
		})
	}
}

// TestHotPathAllocs holds the worker's per-record path to zero allocations.
// Allocation counts do not depend on machine load, so unlike speed this is
// safe to assert in a test.
func TestHotPathAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes allocation counts")
	}
	for _, format := range []NumberFormat{FormatString, FormatNumber} {
		c := mustNew(t, Config{Format: format, Valid: func(int64) error { return nil }})
		dst := make([]byte, 0, 1024)
		for _, v := range []string{orderEvent, orderEventNull, orderEventEscaped, orderEventNumbered} {
			value := []byte(v)
			allocs := testing.AllocsPerRun(100, func() {
				insp := c.Inspect(value)
				if insp.Kind == NeedsNumber {
					dst = c.AppendNumbered(dst[:0], value, insp, 229710323916801)
				}
			})
			if allocs != 0 {
				t.Errorf("%v: Inspect+AppendNumbered(%q): %v allocs, want 0", format, value, allocs)
			}
		}
	}
	value := []byte(orderEvent)
	if allocs := testing.AllocsPerRun(100, func() { _, _, _ = Field(value, "customer_id") }); allocs != 0 {
		t.Errorf("Field: %v allocs, want 0", allocs)
	}
	rec := sampleAuditRecord()
	dst := make([]byte, 0, 1024)
	if allocs := testing.AllocsPerRun(100, func() { dst = rec.AppendJSON(dst[:0]) }); allocs != 0 {
		t.Errorf("AuditRecord.AppendJSON: %v allocs, want 0", allocs)
	}
}

// TestRecovers checks the checker: a splice check that accepts anything
// would make every splice test pass.
func TestRecovers(t *testing.T) {
	num := []byte(`"7"`)
	tests := []struct {
		value, out, member string
		want               bool
	}{
		{`{"a":1}`, `{"a":1,"n":"7"}`, `,"n":`, true},
		{`{}`, `{"n":"7"}`, `"n":`, true},
		{`{"n":null}`, `{"n":"7"}`, `,"n":`, true},
		{`{"a":1}`, `{"a":2,"n":"7"}`, `,"n":`, false},
		{`{"a":1}`, `{"a":1,"n":"7"} `, `,"n":`, false},
		{`{"a":1}`, `{"a":1,"n":"8"}`, `,"n":`, false},
		{`{"a":1}`, `{"a":1"n":"7"}`, `,"n":`, false},
		{`{}`, `{,"n":"7"}`, `"n":`, false},
		{`{"n":nul}`, `{"n":"7"l}`, `,"n":`, false},
		{`{"a":null}`, `{"a":nul"7"}`, `,"n":`, false},
	}
	for _, tt := range tests {
		if got := recovers([]byte(tt.value), []byte(tt.out), num, []byte(tt.member)); got != tt.want {
			t.Errorf("recovers(%q, %q, %q) = %v, want %v", tt.value, tt.out, tt.member, got, tt.want)
		}
	}
}

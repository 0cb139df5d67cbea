package codec

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"testing"
	"unicode/utf8"
)

var fuzzSeeds = []string{
	orderEvent, orderEventNull, orderEventEscaped, orderEventNumbered,
	`{}`, ` { } `, `{"order_no":null}`, `{"order_no":"1"}`, `{"order_no":1}`, `{"order_no":"007"}`,
	`{"order_no":9223372036854775808}`, `{"order_no":"9223372036854775807"}`, `{"order_no":-0}`,
	`{"order\u005fno":"\u0031"}`, `{"order_no":1,"order_no":2}`, `{"a":{"order_no":1}}`,
	`{"a":"\ud800"}`, `{"\ud83d\ude00":"x"}`, `[1]`, `"s"`, `{} x`, "\ufeff{}", "{\"a\":\"\xff\"}",
	"{\"a\":\"\t\"}", `{"a":[{"b":[]},-1.5e+3,true,false,null]}`, "", " ",
}

// FuzzInspect checks Inspect and Field against encoding/json on arbitrary
// bytes. Invariants:
//   - neither panics, and neither modifies its input;
//   - with limits on depth and elements (see checkInspect), a value over one
//     is too_deep or too_many_elements, the first one reached in reading
//     order, counted independently with encoding/json's tokenizer;
//   - otherwise the class agrees with the standard library (see oracle): too_large iff
//     over MaxBytes, else invalid_utf8 iff !utf8.Valid, else not_json iff
//     !json.Valid, else not_object iff the top level is not an object, else
//     the top-level members encoding/json decodes decide duplicate_field,
//     needs_number, has_number (with the same int64) or invalid_number;
//   - a Bad value has an *InputError of its class, pointing inside it;
//   - a value needing a number is numbered into valid JSON that reads back
//     as the id, and removing the added bytes gives the input back exactly;
//   - Field agrees with encoding/json on every top-level key's value.
func FuzzInspect(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	big := mustNew(f, Config{})
	small := mustNew(f, Config{MaxBytes: 64, Format: FormatNumber})
	tight := mustNew(f, Config{MaxDepth: 3, MaxElements: 8})
	f.Fuzz(func(t *testing.T, value []byte) {
		orig := bytes.Clone(value)
		for _, c := range []*Codec{big, small, tight} {
			in := checkInspect(t, c, value)
			if !bytes.Equal(value, orig) {
				t.Fatalf("Inspect modified its input: %q -> %q", orig, value)
			}
			switch in.Kind {
			case NeedsNumber:
				checkSplice(t, c, value, in, int64(len(value))*1000003)
			case Bad:
				var ie *InputError
				if err := in.Err(); !errors.As(err, &ie) || ie.Class != in.Class() || !errors.Is(err, in.Class().Err()) ||
					ie.Offset < 0 || ie.Offset > len(value) {
					t.Fatalf("Inspect(%q).Err() = %#v, want an *InputError of class %q inside the value", value, err, in.Class())
				}
			}
		}
		checkFields(t, value)
		if !bytes.Equal(value, orig) {
			t.Fatalf("Field modified its input: %q -> %q", orig, value)
		}
	})
}

// checkFields compares Field, for every top-level key of value and one key
// it lacks, with encoding/json.
func checkFields(t *testing.T, value []byte) {
	t.Helper()
	names := []string{"order_no", "\x00absent"}
	if utf8.Valid(value) && json.Valid(value) && bytes.TrimLeft(value, " \t\r\n")[0] == '{' {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(value, &m); err != nil {
			t.Fatalf("json.Unmarshal(%q): %v", value, err)
		}
		for k := range m {
			names = append(names, k)
		}
	}
	for _, name := range names {
		want := oracle(t, value, name, math.MaxInt)
		raw, ok, err := Field(value, name)
		switch want.class {
		case ClassDuplicateField, ClassInvalidUTF8, ClassNotJSON, ClassNotObject:
			if ClassOf(err) != want.class {
				t.Fatalf("Field(%q, %q) error = %v, want class %q", value, name, err, want.class)
			}
			continue
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(value, &m); err != nil {
			t.Fatalf("json.Unmarshal(%q): %v", value, err)
		}
		v, present := m[name]
		switch {
		case !present || string(v) == "null":
			if ok || err != nil {
				t.Fatalf("Field(%q, %q) = %q, %v, %v; want absent", value, name, raw, ok, err)
			}
		case v[0] == '"':
			var s string
			if err := json.Unmarshal(v, &s); err != nil {
				t.Fatal(err)
			}
			if !ok || err != nil || string(raw) != s {
				t.Fatalf("Field(%q, %q) = %q, %v, %v; want %q", value, name, raw, ok, err, s)
			}
		case v[0] == '-' || v[0]-'0' <= 9:
			if !ok || err != nil || string(raw) != string(v) {
				t.Fatalf("Field(%q, %q) = %q, %v, %v; want %s", value, name, raw, ok, err, v)
			}
		default:
			if ok || ClassOf(err) != ClassMissingKey {
				t.Fatalf("Field(%q, %q) = %q, %v, %v; want missing_key for %s", value, name, raw, ok, err, v)
			}
		}
	}
}

// FuzzSplice numbers arbitrary values with arbitrary field names, formats
// and ids. Invariants: for every valid field name, Inspect agrees with
// oracle, and every value that needs a number is numbered into valid JSON
// that carries the id (as Inspect, Field and encoding/json read it) and
// gives back the original exactly when the added bytes are removed; every
// other value is left alone (Inspect does not modify it).
func FuzzSplice(f *testing.F) {
	for i, s := range fuzzSeeds {
		f.Add([]byte(s), "order_no", int64(i)<<40, i%2 == 0)
	}
	f.Add([]byte(`{"a\"b":null}`), "a\"b", int64(7), false)
	f.Add([]byte(`{"\u00e9":1}`), "é", int64(7), true)
	f.Add([]byte(`{"x":1}`), "\n\u2028\x7f", int64(math.MaxInt64), false)
	f.Fuzz(func(t *testing.T, value []byte, field string, id int64, number bool) {
		if !utf8.ValidString(field) || field == "" {
			return // New rejects or replaces these; TestNew covers them.
		}
		format := FormatString
		if number {
			format = FormatNumber
		}
		c := mustNew(t, Config{Field: field, Format: format})
		id &= math.MaxInt64
		orig := bytes.Clone(value)
		in := checkInspect(t, c, value)
		if !bytes.Equal(value, orig) {
			t.Fatalf("Inspect modified its input: %q -> %q", orig, value)
		}
		if in.Kind == NeedsNumber {
			checkSplice(t, c, value, in, id)
		}
	})
}

// FuzzParseAuditRecord parses arbitrary bytes as audit records. Invariants:
// no panic; an error wraps ErrInvalidAuditRecord; a record that parses is
// written by AppendJSON as valid JSON that parses back to the same record
// and writes back to the same bytes; fields outside the schema are ignored.
func FuzzParseAuditRecord(f *testing.F) {
	f.Add(sampleAuditRecord().AppendJSON(nil))
	f.Add(AuditRecord{Topic: "t", Anomalies: []string{AnomalyInvalid}}.AppendJSON(nil))
	f.Add([]byte(`{"id":"1","unix_ms":0,"time":"1970-01-01T00:00:00.000Z","elapsed_ms":0,"server":0,` +
		`"worker":0,"sequence":0,"topic":"\u00e9","partition":0,"offset":0,"record_unix_ms":0,` +
		`"lag_ms":0,"source":"","anomalies":[],"extra":{}}`))
	f.Add([]byte(`{}`))
	f.Add(AuditRecord{Topic: "t", Anomalies: []string{AnomalyRenumbered}, FirstCopy: &Copy{Topic: "t", Offset: 1, ID: 2}}.AppendJSON(nil))
	f.Fuzz(func(t *testing.T, data []byte) {
		rec, err := ParseAuditRecord(data)
		if err != nil {
			if !errors.Is(err, ErrInvalidAuditRecord) {
				t.Fatalf("ParseAuditRecord(%q) error %v does not wrap ErrInvalidAuditRecord", data, err)
			}
			return
		}
		out := rec.AppendJSON(nil)
		if !json.Valid(out) {
			t.Fatalf("AppendJSON(%+v) = %s, not valid JSON", rec, out)
		}
		back, err := ParseAuditRecord(out)
		if err != nil {
			t.Fatalf("ParseAuditRecord(AppendJSON(%+v) = %s): %v", rec, out, err)
		}
		if !reflect.DeepEqual(back, rec) {
			t.Fatalf("round trip of %s: %+v, want %+v", out, back, rec)
		}
		if again := back.AppendJSON(nil); !bytes.Equal(again, out) {
			t.Fatalf("AppendJSON is not stable: %s then %s", out, again)
		}
	})
}

// FuzzParseSource parses arbitrary strings as sources. Invariants: no
// panic; an error wraps ErrInvalidSource; a source that parses is written
// back by AppendSource as the same string.
func FuzzParseSource(f *testing.F) {
	for _, s := range []string{"orders/0/0", "a/b/1/2", "t/2147483647/9223372036854775807", "t/01/1", "//1/2", "t/-1/0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		topic, partition, offset, err := ParseSource(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidSource) {
				t.Fatalf("ParseSource(%q) error %v does not wrap ErrInvalidSource", s, err)
			}
			return
		}
		if topic == "" || partition < 0 || offset < 0 {
			t.Fatalf("ParseSource(%q) = %q, %d, %d", s, topic, partition, offset)
		}
		if got := AppendSource(nil, topic, partition, offset); string(got) != s {
			t.Fatalf("AppendSource(ParseSource(%q)) = %q", s, got)
		}
	})
}

package codec_test

import (
	"testing"

	"github.com/flakestream/flakestream/codec"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestAppendUntrustedRenamesReservedHeaders(t *testing.T) {
	in := []kgo.RecordHeader{
		{Key: codec.HeaderNumber, Value: []byte("1")},
		{Key: "trace", Value: []byte("t")},
		{Key: "FLAKESTREAM-SOURCE", Value: []byte("x/0/0")},
		{Key: "flakestream", Value: []byte("no dash: not reserved")},
		{Key: "untrusted-flakestream-number", Value: []byte("2")},
	}
	got := codec.AppendUntrusted(nil, in)
	want := []string{"untrusted-flakestream-number", "trace", "untrusted-FLAKESTREAM-SOURCE", "flakestream", "untrusted-flakestream-number"}
	if len(got) != len(want) {
		t.Fatalf("%d headers, want %d", len(got), len(want))
	}
	for i, h := range got {
		if h.Key != want[i] || string(h.Value) != string(in[i].Value) {
			t.Errorf("header %d: %q=%q, want %q=%q", i, h.Key, h.Value, want[i], in[i].Value)
		}
	}
	if in[0].Key != codec.HeaderNumber {
		t.Errorf("the input headers were changed: %v", in)
	}
}

func TestLastHeader(t *testing.T) {
	hs := []kgo.RecordHeader{{Key: "a", Value: []byte("1")}, {Key: "b", Value: []byte("2")}, {Key: "a", Value: []byte("3")}}
	for _, tc := range []struct {
		key  string
		want string
		ok   bool
	}{{"a", "3", true}, {"b", "2", true}, {"c", "", false}, {"A", "", false}} {
		v, ok := codec.LastHeader(hs, tc.key)
		if string(v) != tc.want || ok != tc.ok {
			t.Errorf("LastHeader(%q) = %q %v, want %q %v", tc.key, v, ok, tc.want, tc.ok)
		}
	}
}

// Renumber turns a HasNumber inspection into one that replaces the number
// in place, whatever its spelling; other inspections are left as they are.
func TestRenumberReplacesTheNumber(t *testing.T) {
	c, err := codec.New(codec.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ in, want string }{
		{`{"order_no":"123","a":1}`, `{"order_no":"42","a":1}`},
		{`{"a":1, "order_no" : 9876543210 }`, `{"a":1, "order_no" : "42" }`},
		{`{"order_no":"\u0031\u0032"}`, `{"order_no":"42"}`},
	} {
		insp := c.Inspect([]byte(tc.in))
		if insp.Kind != codec.HasNumber {
			t.Fatalf("%s: %v", tc.in, insp.Kind)
		}
		re := insp.Renumber()
		if re.Kind != codec.NeedsNumber || re.Number != 0 {
			t.Fatalf("%s: Renumber gave %v %d", tc.in, re.Kind, re.Number)
		}
		got := c.AppendNumbered(nil, []byte(tc.in), re, 42)
		if string(got) != tc.want || len(got) != c.NumberedLen([]byte(tc.in), re, 42) {
			t.Errorf("%s renumbered: %s (NumberedLen %d), want %s", tc.in, got, c.NumberedLen([]byte(tc.in), re, 42), tc.want)
		}
		if again := c.Inspect(got); again.Kind != codec.HasNumber || again.Number != 42 {
			t.Errorf("%s: the renumbered value reads back as %v %d", got, again.Kind, again.Number)
		}
	}
	bad := c.Inspect([]byte(`[]`))
	if re := bad.Renumber(); re.Kind != codec.Bad || re.Class() != codec.ClassNotObject {
		t.Errorf("Renumber of a Bad inspection: %v %q", re.Kind, re.Class())
	}
	if in := codec.Has(7, 10); in.Kind != codec.HasNumber || in.Number != 7 || in.Size() != 10 || in.Renumber().Size() != 10 {
		t.Errorf("Has(7, 10) = %+v", in)
	}
}

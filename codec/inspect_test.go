package codec

import (
	"errors"
	"strings"
	"testing"
)

func mustNew(t testing.TB, cfg Config) *Codec {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	return c
}

func TestNew(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr bool
		field   string
		member  string
		max     int
	}{
		{name: "defaults", cfg: Config{}, field: "order_no", member: `,"order_no":`, max: 1 << 20},
		{name: "custom", cfg: Config{Field: "id", Format: FormatNumber, MaxBytes: 10}, field: "id", member: `,"id":`, max: 10},
		{name: "field escaped", cfg: Config{Field: "a\"b\\c\n"}, field: "a\"b\\c\n", member: `,"a\"b\\c\n":`, max: 1 << 20},
		{name: "field non-ascii", cfg: Config{Field: "编号"}, field: "编号", member: `,"编号":`, max: 1 << 20},
		{name: "field invalid utf-8", cfg: Config{Field: "a\xffb"}, wantErr: true},
		{name: "format unknown", cfg: Config{Format: 2}, wantErr: true},
		{name: "format negative", cfg: Config{Format: -1}, wantErr: true},
		{name: "max bytes negative", cfg: Config{MaxBytes: -1}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := New(tt.cfg)
			if tt.wantErr {
				if !errors.Is(err, ErrInvalidConfig) {
					t.Fatalf("New(%+v) error = %v, want ErrInvalidConfig", tt.cfg, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("New(%+v): %v", tt.cfg, err)
			}
			if c.FieldName() != tt.field || string(c.member) != tt.member || c.MaxBytes() != tt.max {
				t.Errorf("New(%+v) = field %q member %q max %d, want %q %q %d",
					tt.cfg, c.FieldName(), c.member, c.MaxBytes(), tt.field, tt.member, tt.max)
			}
		})
	}
}

func TestParseNumberFormat(t *testing.T) {
	for _, f := range []NumberFormat{FormatString, FormatNumber} {
		got, err := ParseNumberFormat(f.String())
		if err != nil || got != f {
			t.Errorf("ParseNumberFormat(%q) = %v, %v, want %v", f.String(), got, err, f)
		}
	}
	if got, err := ParseNumberFormat(""); err != nil || got != FormatString {
		t.Errorf(`ParseNumberFormat("") = %v, %v, want the default`, got, err)
	}
	if _, err := ParseNumberFormat("int"); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf(`ParseNumberFormat("int") error = %v, want ErrInvalidConfig`, err)
	}
}

func TestInspect(t *testing.T) {
	const (
		needs = NeedsNumber
		has   = HasNumber
	)
	tests := []struct {
		name   string
		value  string
		kind   Kind
		class  Class
		number int64
		at     int // offset of a Bad value's problem; -1 to skip the check
	}{
		// Absent or null: needs a number.
		{name: "empty object", value: `{}`, kind: needs},
		{name: "absent", value: `{"a":1,"b":"x"}`, kind: needs},
		{name: "null", value: `{"order_no":null}`, kind: needs},
		{name: "null spaced", value: "{ \"order_no\" :\tnull }", kind: needs},
		{name: "whitespace everywhere", value: " \t\r\n{ \n\"a\" \r: [ 1 , { } ] \t, \"b\":\"\" }\n\t ", kind: needs},
		{name: "nested field ignored", value: `{"customer":{"order_no":"5"},"lines":[{"order_no":6}]}`, kind: needs},
		{name: "field inside a string value", value: `{"note":"\"order_no\":\"5\""}`, kind: needs},
		{name: "prefix of field", value: `{"order_n":1,"order_no_x":2,"Order_no":3}`, kind: needs},
		{name: "escaped other key", value: `{"a\"b":1}`, kind: needs},
		{name: "lone surrogate escape", value: `{"a":"\ud800","\udc00x":1}`, kind: needs},
		{name: "surrogate pair", value: `{"a":"\ud83d\ude00"}`, kind: needs},
		{name: "non-ascii", value: `{"名前":"注文","emoji":"😀"}`, kind: needs},
		{name: "numbers", value: `{"a":-0,"b":1.5e-3,"c":0E+1,"d":[-1.0,2e9]}`, kind: needs},
		{name: "literals", value: `{"a":true,"b":false,"c":null}`, kind: needs},

		// An existing valid number.
		{name: "string", value: `{"order_no":"123"}`, kind: has, number: 123},
		{name: "integer", value: `{"order_no":123}`, kind: has, number: 123},
		{name: "zero string", value: `{"order_no":"0"}`, kind: has, number: 0},
		{name: "zero integer", value: `{"order_no":0}`, kind: has, number: 0},
		{name: "max string", value: `{"order_no":"9223372036854775807"}`, kind: has, number: 9223372036854775807},
		{name: "max integer", value: `{"order_no":9223372036854775807}`, kind: has, number: 9223372036854775807},
		{name: "escaped key", value: `{"order\u005fno":"5"}`, kind: has, number: 5},
		{name: "escaped key slash", value: `{"order_no\/x":1,"\u006frder_no":2}`, kind: has, number: 2},
		{name: "escaped digits", value: `{"order_no":"\u0031\u0032"}`, kind: has, number: 12},
		{name: "last member", value: `{"a":{"order_no":1},"order_no":"77"}`, kind: has, number: 77},

		// Invalid numbers.
		{name: "empty string", value: `{"order_no":""}`, class: ClassInvalidNumber, at: 12},
		{name: "letters", value: `{"order_no":"abc"}`, class: ClassInvalidNumber, at: 12},
		{name: "negative", value: `{"order_no":-5}`, class: ClassInvalidNumber, at: 12},
		{name: "negative string", value: `{"order_no":"-5"}`, class: ClassInvalidNumber, at: 12},
		{name: "negative zero", value: `{"order_no":-0}`, class: ClassInvalidNumber, at: 12},
		{name: "fraction", value: `{"order_no":1.5}`, class: ClassInvalidNumber, at: 12},
		{name: "integral fraction", value: `{"order_no":1.0}`, class: ClassInvalidNumber, at: 12},
		{name: "exponent", value: `{"order_no":1e3}`, class: ClassInvalidNumber, at: 12},
		{name: "plus", value: `{"order_no":"+1"}`, class: ClassInvalidNumber, at: 12},
		{name: "spaces in string", value: `{"order_no":" 1"}`, class: ClassInvalidNumber, at: 12},
		{name: "leading zeros", value: `{"order_no":"007"}`, class: ClassInvalidNumber, at: 12},
		{name: "double zero", value: `{"order_no":"00"}`, class: ClassInvalidNumber, at: 12},
		{name: "above max string", value: `{"order_no":"9223372036854775808"}`, class: ClassInvalidNumber, at: 12},
		{name: "above max integer", value: `{"order_no":9223372036854775808}`, class: ClassInvalidNumber, at: 12},
		{name: "far above max", value: `{"order_no":99999999999999999999999}`, class: ClassInvalidNumber, at: 12},
		{name: "true", value: `{"order_no":true}`, class: ClassInvalidNumber, at: 12},
		{name: "false", value: `{"order_no":false}`, class: ClassInvalidNumber, at: 12},
		{name: "object", value: `{"order_no":{"v":1}}`, class: ClassInvalidNumber, at: 12},
		{name: "array", value: `{"order_no":[1]}`, class: ClassInvalidNumber, at: 12},
		{name: "escaped non-digit", value: `{"order_no":"1\n"}`, class: ClassInvalidNumber, at: 12},
		{name: "escaped too long", value: `{"order_no":"` + strings.Repeat(`\u0031`, 20) + `"}`, class: ClassInvalidNumber, at: 12},

		// Duplicates, whatever their values.
		{name: "duplicate", value: `{"order_no":"1","order_no":"1"}`, class: ClassDuplicateField, at: 16},
		{name: "duplicate null", value: `{"order_no":null, "order_no":null}`, class: ClassDuplicateField, at: 18},
		{name: "duplicate escaped", value: `{"order_no":1,"order\u005fno":2}`, class: ClassDuplicateField, at: 14},
		{name: "duplicate invalid", value: `{"order_no":"x","a":0,"order_no":2}`, class: ClassDuplicateField, at: 22},

		// Not objects.
		{name: "array top", value: `[{"order_no":1}]`, class: ClassNotObject, at: 0},
		{name: "string top", value: ` "{}"`, class: ClassNotObject, at: 1},
		{name: "number top", value: `1`, class: ClassNotObject, at: 0},
		{name: "null top", value: "null\n", class: ClassNotObject, at: 0},

		// Not JSON.
		{name: "empty input", value: ``, class: ClassNotJSON, at: 0},
		{name: "only whitespace", value: " \n\t", class: ClassNotJSON, at: 3},
		{name: "bom", value: "\ufeff{}", class: ClassNotJSON, at: 0},
		{name: "trailing garbage", value: `{} x`, class: ClassNotJSON, at: 3},
		{name: "two objects", value: `{}{}`, class: ClassNotJSON, at: 2},
		{name: "truncated", value: `{"a":1`, class: ClassNotJSON, at: 6},
		{name: "truncated string", value: `{"a":"x`, class: ClassNotJSON, at: 7},
		{name: "trailing comma", value: `{"a":1,}`, class: ClassNotJSON, at: 7},
		{name: "trailing comma array", value: `{"a":[1,]}`, class: ClassNotJSON, at: 8},
		{name: "single quotes", value: `{'a':1}`, class: ClassNotJSON, at: 1},
		{name: "bare key", value: `{a:1}`, class: ClassNotJSON, at: 1},
		{name: "missing colon", value: `{"a" 1}`, class: ClassNotJSON, at: 5},
		{name: "missing value", value: `{"a":}`, class: ClassNotJSON, at: 5},
		{name: "leading zero number", value: `{"a":01}`, class: ClassNotJSON, at: 6},
		{name: "leading zero field", value: `{"order_no":007}`, class: ClassNotJSON, at: 13},
		{name: "plus number", value: `{"a":+1}`, class: ClassNotJSON, at: 5},
		{name: "dot number", value: `{"a":.5}`, class: ClassNotJSON, at: 5},
		{name: "bare dot", value: `{"a":1.}`, class: ClassNotJSON, at: 7},
		{name: "bare exponent", value: `{"a":1e}`, class: ClassNotJSON, at: 7},
		{name: "NaN", value: `{"a":NaN}`, class: ClassNotJSON, at: 5},
		{name: "bad literal", value: `{"a":nul}`, class: ClassNotJSON, at: 8},
		{name: "literal suffix", value: `{"a":truex}`, class: ClassNotJSON, at: 9},
		{name: "control char in string", value: "{\"a\":\"x\ty\"}", class: ClassNotJSON, at: 7},
		{name: "control char in key", value: "{\"a\x00\":1}", class: ClassNotJSON, at: 3},
		{name: "newline in string", value: "{\"a\":\"\n\"}", class: ClassNotJSON, at: 6},
		{name: "bad escape", value: `{"a":"\x"}`, class: ClassNotJSON, at: 6},
		{name: "short unicode escape", value: `{"a":"\u12"}`, class: ClassNotJSON, at: 6},
		{name: "non-hex unicode escape", value: `{"a":"\u12g4"}`, class: ClassNotJSON, at: 6},
		{name: "unclosed array", value: `{"a":[1}`, class: ClassNotJSON, at: 7},
		{name: "comment", value: `{"a":1 /* x */}`, class: ClassNotJSON, at: 7},
		{name: "vertical tab", value: "{\v}", class: ClassNotJSON, at: 1},
		{name: "non-breaking space", value: "{\u00a0}", class: ClassNotJSON, at: 1},

		// Invalid UTF-8 outranks every syntax error.
		{name: "bad utf-8 in value", value: "{\"a\":\"\xff\"}", class: ClassInvalidUTF8, at: 6},
		{name: "bad utf-8 in key", value: "{\"\xc3\x28\":1}", class: ClassInvalidUTF8, at: 2},
		{name: "bad utf-8 in field value", value: "{\"order_no\":\"1\xe2\x82\"}", class: ClassInvalidUTF8, at: 14},
		{name: "utf-8 surrogate", value: "{\"a\":\"\xed\xa0\x80\"}", class: ClassInvalidUTF8, at: 6},
		{name: "overlong utf-8", value: "{\"a\":\"\xc0\xaf\"}", class: ClassInvalidUTF8, at: 6},
		{name: "bad utf-8 outside string", value: "{\xff}", class: ClassInvalidUTF8, at: 1},
		{name: "bad utf-8 after syntax error", value: "{\"a\":1 x \"\xff\"}", class: ClassInvalidUTF8, at: 10},
		{name: "bad utf-8 after end", value: "{} \xff", class: ClassInvalidUTF8, at: 3},
		{name: "bad utf-8 in non-object", value: "[\"\xff\"]", class: ClassInvalidUTF8, at: 2},
	}
	c := mustNew(t, Config{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			value := []byte(tt.value)
			in := checkInspect(t, c, value)
			if in.Kind != tt.kind || in.Class() != tt.class || in.Number != tt.number {
				t.Fatalf("Inspect(%q) = %v %q %d (%v), want %v %q %d",
					tt.value, in.Kind, in.Class(), in.Number, in.Err(), tt.kind, tt.class, tt.number)
			}
			if tt.kind != Bad {
				if in.Err() != nil {
					t.Errorf("Inspect(%q).Err() = %v, want nil", tt.value, in.Err())
				}
				return
			}
			var ie *InputError
			if err := in.Err(); !errors.As(err, &ie) || !errors.Is(err, tt.class.Err()) {
				t.Fatalf("Inspect(%q).Err() = %v, want an *InputError wrapping %v", tt.value, err, tt.class.Err())
			}
			if tt.at >= 0 && ie.Offset != tt.at {
				t.Errorf("Inspect(%q).Err() offset = %d, want %d (%v)", tt.value, ie.Offset, tt.at, ie)
			}
		})
	}
}

func TestInspectTooLarge(t *testing.T) {
	c := mustNew(t, Config{MaxBytes: 8})
	checks := []struct {
		value string
		class Class
	}{
		{`{"a":1}`, ""},              // 7 bytes
		{`{"a":12}`, ""},             // 8 bytes: at the limit
		{`{"a":123}`, ClassTooLarge}, // 9 bytes
		{"\xff\xff\xff\xff\xff\xff\xff\xff\xff", ClassTooLarge},
	}
	for _, tt := range checks {
		in := checkInspect(t, c, []byte(tt.value))
		if in.Class() != tt.class {
			t.Errorf("Inspect(%q) class = %q, want %q", tt.value, in.Class(), tt.class)
		}
		if tt.class == ClassTooLarge {
			var ie *InputError
			if !errors.As(in.Err(), &ie) || ie.Offset != 8 || !errors.Is(ie, ErrTooLarge) {
				t.Errorf("Inspect(%q).Err() = %v, want ErrTooLarge at byte 8", tt.value, in.Err())
			}
		}
	}
}

// TestInspectDepth checks the nesting limit at its default and at its
// highest, encoding/json's: a value nested one level too deep is too_deep,
// however it continues.
func TestInspectDepth(t *testing.T) {
	for _, c := range []*Codec{mustNew(t, Config{}), mustNew(t, Config{MaxDepth: maxDepth})} {
		testDepth(t, c, c.MaxDepth())
	}
	deep := []byte(strings.Repeat(`{"a":`, 10000) + "1" + strings.Repeat("}", 10000))
	if in := mustNew(t, Config{}).Inspect(deep); in.Class() != ClassTooDeep || !errors.Is(in.Err(), ErrTooDeep) {
		t.Errorf("10,000 levels: %v", in.Err())
	}
}

// Elements are counted at every level; the top-level value is not one.
func TestInspectElements(t *testing.T) {
	c := mustNew(t, Config{MaxElements: 5})
	for _, tc := range []struct {
		value string
		want  Class
	}{
		{`{"a":1,"b":2,"c":3,"d":4,"e":5}`, ""},
		{`{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6}`, ClassTooManyElements},
		{`{"a":[1,2,3],"b":4}`, ""},
		{`{"a":[1,2,3],"b":{"c":4}}`, ClassTooManyElements},
		{`{"a":[[[[]]]]}`, ""},
		{`{"a":[[[[[[]]]]]]}`, ClassTooManyElements},
		{`{"a":[null,null,null,null,null,null] x`, ClassTooManyElements},
		{`[1,2,3,4,5,6]`, ClassTooManyElements},
		{`[1,2,3,4,5]`, ClassNotObject},
	} {
		in := checkInspect(t, c, []byte(tc.value))
		if in.Class() != tc.want {
			t.Errorf("%s: class %q (%v), want %q", tc.value, in.Class(), in.Err(), tc.want)
		}
	}
	if _, err := New(Config{MaxElements: -1}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("MaxElements -1: %v", err)
	}
	for _, d := range []int{-1, maxDepth + 1} {
		if _, err := New(Config{MaxDepth: d}); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("MaxDepth %d: %v", d, err)
		}
	}
}

func testDepth(t *testing.T, c *Codec, maxDepth int) {
	t.Helper()
	for _, depth := range []int{maxDepth - 1, maxDepth, maxDepth + 1} {
		inner := depth - 1 // the top-level object is one level
		value := `{"a":` + strings.Repeat("[", inner) + strings.Repeat("]", inner) + `}`
		in := checkInspect(t, c, []byte(value))
		if want := depth <= maxDepth; (in.Kind == NeedsNumber) != want {
			t.Errorf("depth %d: Inspect kind %v (%v), want accepted=%v", depth, in.Kind, in.Err(), want)
		}
		arr := strings.Repeat("[", depth) + strings.Repeat("]", depth)
		in = checkInspect(t, c, []byte(arr))
		if want := depth <= maxDepth; (in.Class() == ClassNotObject) != want {
			t.Errorf("array depth %d: Inspect class %q, want not_object=%v", depth, in.Class(), want)
		}
	}
}

func TestInspectValid(t *testing.T) {
	errOdd := errors.New("odd number")
	c := mustNew(t, Config{Valid: func(n int64) error {
		if n%2 == 1 {
			return errOdd
		}
		return nil
	}})
	if in := c.Inspect([]byte(`{"order_no":"4"}`)); in.Kind != HasNumber || in.Number != 4 {
		t.Errorf("even number: Inspect = %v %d (%v), want has_number 4", in.Kind, in.Number, in.Err())
	}
	in := c.Inspect([]byte(`{"order_no":"5"}`))
	if in.Class() != ClassInvalidNumber || !errors.Is(in.Err(), errOdd) || !errors.Is(in.Err(), ErrInvalidNumber) {
		t.Errorf("odd number: Inspect = %q %v, want invalid_number wrapping the check's error", in.Class(), in.Err())
	}
	if in := c.Inspect([]byte(`{"order_no":null}`)); in.Kind != NeedsNumber {
		t.Errorf("null: Inspect = %v, want needs_number: Valid vets only existing numbers", in.Kind)
	}
}

func TestInspectDoesNotModify(t *testing.T) {
	c := mustNew(t, Config{})
	for _, v := range []string{`{"order_no":"\u0031"}`, `{"order\u005fno":null}`, `{"a":"\ud800"}`} {
		value := []byte(v)
		c.Inspect(value)
		if string(value) != v {
			t.Errorf("Inspect changed %q to %q", v, value)
		}
	}
}

func TestInspectOtherField(t *testing.T) {
	c := mustNew(t, Config{Field: "编\"号"})
	for _, tt := range []struct {
		value string
		kind  Kind
	}{
		{`{"编\"号":"1"}`, HasNumber},
		{`{"\u7f16\u0022\u53f7":"1"}`, HasNumber},
		{`{"编号":"1"}`, NeedsNumber},
		{`{"order_no":"1"}`, NeedsNumber},
	} {
		if in := checkInspect(t, c, []byte(tt.value)); in.Kind != tt.kind {
			t.Errorf("Inspect(%q) = %v, want %v", tt.value, in.Kind, tt.kind)
		}
	}
}

func TestInspectionZero(t *testing.T) {
	var in Inspection
	if in.Kind != Bad || in.Err() == nil {
		t.Errorf("zero Inspection = %v, %v; want bad with an error", in.Kind, in.Err())
	}
}

func TestClassOf(t *testing.T) {
	c := mustNew(t, Config{})
	classes := []Class{ClassTooLarge, ClassInvalidUTF8, ClassNotJSON, ClassNotObject,
		ClassDuplicateField, ClassInvalidNumber, ClassMissingKey}
	for _, cl := range classes {
		if cl.Err() == nil {
			t.Errorf("%q.Err() = nil", cl)
		}
		if got := ClassOf(cl.Err()); got != cl {
			t.Errorf("ClassOf(%v) = %q, want %q", cl.Err(), got, cl)
		}
		wrapped := &InputError{Class: cl, Msg: "x"}
		if got := ClassOf(errors.Join(errors.New("other"), wrapped)); got != cl {
			t.Errorf("ClassOf(joined %v) = %q, want %q", wrapped, got, cl)
		}
	}
	if got := ClassOf(c.Inspect([]byte(`[]`)).Err()); got != ClassNotObject {
		t.Errorf("ClassOf(Inspect([])) = %q, want not_object", got)
	}
	if got := ClassOf(errors.New("x")); got != "" {
		t.Errorf("ClassOf(other) = %q, want empty", got)
	}
	if got := ClassOf(nil); got != "" {
		t.Errorf("ClassOf(nil) = %q, want empty", got)
	}
}

func TestInputErrorMessage(t *testing.T) {
	cause := errors.New("server 40 is out of range")
	e := &InputError{Class: ClassInvalidNumber, Offset: 12, Msg: `field "order_no": rejected`, Err: cause}
	want := `codec: invalid_number at byte 12: field "order_no": rejected: server 40 is out of range`
	if e.Error() != want {
		t.Errorf("Error() = %q, want %q", e.Error(), want)
	}
	if !errors.Is(e, cause) || !errors.Is(e, ErrInvalidNumber) || errors.Is(e, ErrNotJSON) {
		t.Errorf("errors.Is on %v matches the wrong errors", e)
	}
}

func TestParseNumberIsCanonical(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "7": 7, "9223372036854775807": 1<<63 - 1} {
		if n, err := ParseNumber([]byte(in)); err != nil || n != want {
			t.Errorf("ParseNumber(%q) = %d, %v; want %d", in, n, err, want)
		}
	}
	for _, bad := range []string{"", "007", "-1", "+1", "1.0", "1e3", " 1", "9223372036854775808", "12a"} {
		if n, err := ParseNumber([]byte(bad)); err == nil {
			t.Errorf("ParseNumber(%q) = %d, want rejected", bad, n)
		}
	}
}

func TestRecordNumberPrefersTheHeader(t *testing.T) {
	value := []byte(`{"order_no":"42"}`)
	cases := []struct {
		header    string
		hasHeader bool
		want      int64
		ok        bool
	}{
		{"", false, 42, true},  // no header: the field
		{"7", true, 7, true},   // the header wins
		{"07", true, 0, false}, // a bad header does not fall back
		{"", true, 0, false},   // nor does an empty one
	}
	for _, c := range cases {
		if n, ok := RecordNumber([]byte(c.header), c.hasHeader, value, "order_no"); n != c.want || ok != c.ok {
			t.Errorf("RecordNumber(%q, %v) = %d, %v; want %d, %v", c.header, c.hasHeader, n, ok, c.want, c.ok)
		}
	}
	if _, ok := RecordNumber(nil, false, []byte(`{}`), "order_no"); ok {
		t.Error("a record without header or field has a number")
	}
}

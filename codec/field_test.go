package codec

import (
	"errors"
	"testing"
)

func TestField(t *testing.T) {
	tests := []struct {
		name  string
		value string
		field string
		raw   string
		ok    bool
		class Class // of the error; "" for none
	}{
		{name: "string", value: `{"k":"abc"}`, field: "k", raw: "abc", ok: true},
		{name: "escaped string", value: `{"k":"a\"b\\c\/d\u00e9\ud83d\ude00\n"}`, field: "k", raw: "a\"b\\c/dé😀\n", ok: true},
		{name: "lone surrogate", value: `{"k":"\ud800x"}`, field: "k", raw: "\ufffdx", ok: true},
		{name: "empty string", value: `{"k":""}`, field: "k", raw: "", ok: true},
		{name: "integer", value: `{"k":123}`, field: "k", raw: "123", ok: true},
		{name: "number literal kept", value: `{"k":-1.50e+3}`, field: "k", raw: "-1.50e+3", ok: true},
		{name: "escaped key", value: `{"\u006b":"v"}`, field: "k", raw: "v", ok: true},
		{name: "whitespace", value: " {\n \"a\" : 1 ,\n \"k\" : \"v\" \n} ", field: "k", raw: "v", ok: true},
		{name: "empty name", value: `{"":"v"}`, field: "", raw: "v", ok: true},
		{name: "absent", value: `{"a":"k"}`, field: "k"},
		{name: "nested only", value: `{"a":{"k":"v"}}`, field: "k"},
		{name: "null", value: `{"k":null}`, field: "k"},
		{name: "true", value: `{"k":true}`, field: "k", class: ClassMissingKey},
		{name: "object", value: `{"k":{}}`, field: "k", class: ClassMissingKey},
		{name: "array", value: `{"k":["v"]}`, field: "k", class: ClassMissingKey},
		{name: "duplicate", value: `{"k":"a","k":"a"}`, field: "k", class: ClassDuplicateField},
		{name: "not json", value: `{"k":"v"`, field: "k", class: ClassNotJSON},
		{name: "not object", value: `["k"]`, field: "k", class: ClassNotObject},
		{name: "invalid utf-8", value: "{\"k\":\"\xff\"}", field: "k", class: ClassInvalidUTF8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw, ok, err := Field([]byte(tt.value), tt.field)
			if ClassOf(err) != tt.class || (err == nil) != (tt.class == "") {
				t.Fatalf("Field(%q, %q) error = %v, want class %q", tt.value, tt.field, err, tt.class)
			}
			if err != nil {
				if !errors.Is(err, tt.class.Err()) {
					t.Errorf("Field(%q, %q) error %v does not wrap %v", tt.value, tt.field, err, tt.class.Err())
				}
				return
			}
			if ok != tt.ok || string(raw) != tt.raw {
				t.Errorf("Field(%q, %q) = %q, %v, want %q, %v", tt.value, tt.field, raw, ok, tt.raw, tt.ok)
			}
		})
	}
}

// TestFieldAliases checks that an unescaped string is returned in place,
// which is what keeps Field free of allocations, and an escaped one is not,
// which keeps the caller's buffer unchanged.
func TestFieldAliases(t *testing.T) {
	value := []byte(`{"k":"plain","e":"a\nb"}`)
	raw, _, _ := Field(value, "k")
	if &raw[0] != &value[6] {
		t.Errorf("Field returned a copy of an unescaped string; want a subslice of value")
	}
	raw, _, _ = Field(value, "e")
	raw[0] = 'X'
	if string(value) != `{"k":"plain","e":"a\nb"}` {
		t.Errorf("writing to an unescaped result changed value: %q", value)
	}
}

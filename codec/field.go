package codec

import (
	"math"
	"strconv"
)

// Field returns the value of the top-level field name in the JSON object
// value, for use as an idempotency key or to read a number back: a string's
// content, unescaped, or a number's literal text. ok is false when the
// field is absent or null. An empty string is present, with empty raw.
//
// raw aliases value when the string has no escapes (no allocation);
// otherwise it is a new slice. Names are compared after unescaping keys, as
// in Inspect.
//
// err is an [*InputError] when value is not a UTF-8 JSON object
// (ClassInvalidUTF8, ClassNotJSON, ClassNotObject), when name appears more
// than once at the top level (ClassDuplicateField), or when the field holds
// true, false, an object or an array (ClassMissingKey: for the worker, a key
// it cannot use is as good as missing). Field has no size limit; check the
// length first if value is untrusted and may be large.
func Field(value []byte, name string) (raw []byte, ok bool, err error) {
	s := scanner{data: value, field: name, maxDepth: maxDepth, maxElems: math.MaxInt}
	if !s.scan() {
		return nil, false, &InputError{Class: s.class, Offset: s.errAt, Msg: s.msg}
	}
	if s.dupAt != 0 {
		return nil, false, &InputError{Class: ClassDuplicateField, Offset: s.dupAt,
			Msg: "field " + strconv.Quote(name) + " appears more than once at the top level"}
	}
	if s.keyAt == 0 {
		return nil, false, nil
	}
	v := value[s.valStart:s.valEnd]
	switch v[0] {
	case 'n':
		return nil, false, nil
	case '"':
		content := v[1 : len(v)-1]
		if s.valEsc {
			content = appendUnescaped(make([]byte, 0, len(content)), content)
		}
		return content, true, nil
	case 't', 'f', '{', '[':
		return nil, false, &InputError{Class: ClassMissingKey, Offset: s.valStart,
			Msg: "field " + strconv.Quote(name) + " holds " + typeName(v[0]) + ", want a string or a number"}
	}
	return v, true, nil
}

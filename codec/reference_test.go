package codec

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestReferenceRoundTrip(t *testing.T) {
	value := bytes.Repeat([]byte(`{"blob":"xyz"}`), 100_000)
	for _, topic := range []string{"orders", strings.Repeat("t", 249)} {
		r := NewReference(topic, 7, 1<<40, []byte("key"), value, 2, ClassOutputTooLarge)
		b := r.Append(nil)
		if len(b) > MaxReferenceBytes {
			t.Fatalf("topic of %d bytes: reference of %d bytes, over %d", len(topic), len(b), MaxReferenceBytes)
		}
		got, err := ParseReference(b)
		if err != nil {
			t.Fatalf("ParseReference(%s): %v", b, err)
		}
		if !got.Matches(value) || got.Source != topic+"/7/1099511627776" || got.Class != ClassOutputTooLarge ||
			got.KeySize != 3 || got.Headers != 2 || len(got.Head) == 0 {
			t.Fatalf("parsed %+v from %s", got, b)
		}
		if got.Matches(value[1:]) || got.Matches(append([]byte{}, value[:len(value)-1]...)) {
			t.Fatal("a reference matches another value")
		}
	}
}

func TestReferenceSmallValue(t *testing.T) {
	r := NewReference("in", 0, 0, nil, []byte("ab"), 0, ClassRejected)
	got, err := ParseReference(r.Append(nil))
	if err != nil || !got.Matches([]byte("ab")) || string(got.Head) != "ab" {
		t.Fatalf("got %+v, %v", got, err)
	}
}

func TestParseReferenceRejects(t *testing.T) {
	good := string(NewReference("in", 0, 5, nil, []byte("abc"), 0, ClassRejected).Append(nil))
	for _, bad := range []string{
		"", "{", "[]", `{"source":"nope","class":"rejected","size":3,"sha256":"00"}`,
		strings.Replace(good, `"class":"rejected"`, `"class":""`, 1),
		strings.Replace(good, `"size":3`, `"size":1`, 1), // head longer than size
		good + strings.Repeat(" ", MaxReferenceBytes),
	} {
		if _, err := ParseReference([]byte(bad)); !errors.Is(err, ErrInvalidReference) {
			t.Errorf("ParseReference(%q) = %v, want ErrInvalidReference", bad, err)
		}
	}
}

func ExampleNewReference() {
	value := []byte(`{"order_ref":"ORD-1","blob":"..."}`)
	ref := NewReference("orders", 3, 42, []byte("ORD-1"), value, 1, ClassOutputTooLarge)
	b := ref.Append(nil)
	back, _ := ParseReference(b)
	fmt.Println(back.Source, back.Class, back.Size, back.Matches(value))
	// Output: orders/3/42 output_too_large 34 true
}

package codec_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/flakestream/flakestream/codec"
)

// ExampleFormat is the loop the worker, replay and the audit run for every
// value format; here with JSON.
func ExampleFormat() {
	c, err := codec.New(codec.Config{})
	if err != nil {
		panic(err)
	}
	var f codec.Format = codec.JSONFormat{C: c} // or a *schema.Format for avro and protobuf
	ctx := context.Background()
	var dst []byte
	for i, value := range []string{`{"sku":"A-1"}`, `{"sku":"A-2","order_no":"7"}`, `[]`} {
		insp, err := f.Inspect(ctx, []byte(value))
		if err != nil {
			// errors.Is(err, codec.ErrUnavailable): abort the transaction and retry.
			panic(err)
		}
		switch insp.Kind {
		case codec.NeedsNumber:
			if dst, err = f.AppendNumbered(ctx, dst[:0], []byte(value), insp, int64(100+i)); err != nil {
				panic(err)
			}
			fmt.Printf("numbered %s\n", dst)
		case codec.HasNumber:
			fmt.Printf("passes through with %d\n", insp.Number)
		case codec.Bad:
			fmt.Printf("dead letter, class %s\n", insp.Class())
		}
	}
	key, ok, _ := f.Field(ctx, []byte(`{"request_id":"r-9"}`), "request_id")
	fmt.Printf("key %s %v\n", key, ok)
	n, ok, _ := f.Number(ctx, dst)
	fmt.Println("number read back:", n, ok)
	// Output:
	// numbered {"sku":"A-1","order_no":"100"}
	// passes through with 7
	// dead letter, class not_object
	// key r-9 true
	// number read back: 100 true
}

func TestParseValueFormat(t *testing.T) {
	for in, want := range map[string]codec.ValueFormat{"": codec.ValueJSON, "json": codec.ValueJSON,
		"avro": codec.ValueAvro, "protobuf": codec.ValueProtobuf} {
		if got, err := codec.ParseValueFormat(in); err != nil || got != want {
			t.Errorf("ParseValueFormat(%q) = %q %v, want %q", in, got, err, want)
		}
	}
	if _, err := codec.ParseValueFormat("xml"); !errors.Is(err, codec.ErrInvalidConfig) {
		t.Errorf("ParseValueFormat(xml) = %v, want ErrInvalidConfig", err)
	}
}

// TestRejectCarriesTheError checks that an Inspection built outside the
// package reports its class, sentinel and message as the codec's own do.
func TestRejectCarriesTheError(t *testing.T) {
	for _, class := range codec.Classes() {
		cause := errors.New("cause")
		insp := codec.Reject(&codec.InputError{Class: class, Offset: 3, Msg: "what is wrong", Err: cause})
		err := insp.Err()
		if insp.Kind != codec.Bad || insp.Class() != class || codec.ClassOf(err) != class ||
			!errors.Is(err, class.Err()) || !errors.Is(err, cause) {
			t.Errorf("%s: Reject gave %v %q %v", class, insp.Kind, insp.Class(), err)
		}
		if want := "codec: " + string(class) + " at byte 3: what is wrong: cause"; err.Error() != want {
			t.Errorf("message %q, want %q", err, want)
		}
	}
	if in := codec.Needs(12); in.Kind != codec.NeedsNumber || in.Size() != 12 {
		t.Errorf("Needs(12) = %+v", in)
	}
	if _, err := codec.ParseNumber([]byte("007")); err == nil {
		t.Error("ParseNumber accepts a leading zero")
	}
}

package schema

import (
	"bytes"
	"errors"
	"testing"

	"github.com/flakestream/flakestream/codec"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/types/dynamicpb"
)

// TestDLQClasses feeds one value of every bad kind and checks its class, its
// sentinel, that Inspect left the bytes untouched, and that AppendNumbered
// refuses it.
func TestDLQClasses(t *testing.T) {
	r, pid, fd := protoSetup(t)
	aid := r.register(t, "avro-value", sr.Schema{Schema: orderV1})
	bad := r.register(t, "bad-value", sr.Schema{Schema: `{"type":"array","items":"long"}`})
	wrongField := r.register(t, "wf-value", sr.Schema{Schema: `{"type":"record","name":"W","fields":[{"name":"order_no","type":"double"}]}`})
	avroF := newFormat(t, r, codec.ValueAvro, func(s *Settings) { s.MaxBytes = 4096 })
	protoF := newFormat(t, r, codec.ValueProtobuf, nil)

	good := avroValue(t, aid, orderV1, v1Order("A"))
	cases := []struct {
		name  string
		f     *Format
		value []byte
		class codec.Class
	}{
		{"empty", avroF, nil, codec.ClassNotFramed},
		{"too short", avroF, []byte{0, 0, 0}, codec.ClassNotFramed},
		{"no magic byte", avroF, append([]byte{1}, good[1:]...), codec.ClassNotFramed},
		{"json", avroF, []byte(`{"sku":"A"}`), codec.ClassNotFramed},
		{"protobuf without indexes", protoF, appendFrame(nil, pid, nil), codec.ClassNotFramed},
		{"unknown id", avroF, append(appendFrame(nil, 9999, nil), good[headerLen:]...), codec.ClassUnknownSchema},
		{"protobuf schema as avro", avroF, append(appendFrame(nil, pid, nil), good[headerLen:]...), codec.ClassUnknownSchema},
		{"avro schema as protobuf", protoF, append(appendFrame(nil, aid, nil), 0), codec.ClassUnknownSchema},
		{"avro truncated", avroF, good[:len(good)-2], codec.ClassUndecodable},
		{"avro trailing bytes", avroF, append(bytes.Clone(good), 0), codec.ClassUndecodable},
		{"avro bad union index", avroF, append(bytes.Clone(good[:len(good)-1]), 9), codec.ClassUndecodable},
		{"protobuf garbage", protoF, append(appendFrame(nil, pid, []int{1}), 0xff, 0xff), codec.ClassUndecodable},
		{"protobuf index names nothing", protoF, protoValue(t, pid, []int{42}, orderMsg(fd, "Order")), codec.ClassUndecodable},
		{"protobuf message lacks the field", protoF, protoValue(t, pid, []int{5}, orderMsg(fd, "NoNumber")), codec.ClassNoNumberField},
		{"protobuf field of another type", protoF, protoValue(t, pid, []int{6},
			dynamicpb.NewMessage(fd.Messages().ByName("WrongType"))), codec.ClassNoNumberField},
		{"avro top level not a record", avroF, append(appendFrame(nil, bad, nil), 0), codec.ClassNoNumberField},
		{"avro field of another type", avroF, append(appendFrame(nil, wrongField, nil), make([]byte, 8)...), codec.ClassNoNumberField},
		{"too large", avroF, append(bytes.Clone(good), make([]byte, 5000)...), codec.ClassTooLarge},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := bytes.Clone(tc.value)
			insp, err := tc.f.Inspect(ctx, tc.value)
			if err != nil {
				t.Fatal(err)
			}
			if insp.Kind != codec.Bad || insp.Class() != tc.class {
				t.Fatalf("Inspect = %v %q (%v), want bad %q", insp.Kind, insp.Class(), insp.Err(), tc.class)
			}
			if e := insp.Err(); !errors.Is(e, tc.class.Err()) || codec.ClassOf(e) != tc.class {
				t.Fatalf("Err() = %v: not %q", e, tc.class)
			}
			if !bytes.Equal(before, tc.value) {
				t.Fatal("Inspect changed the value")
			}
			if _, err := tc.f.AppendNumbered(ctx, nil, tc.value, insp, 1); err == nil {
				t.Fatal("AppendNumbered numbered a bad value")
			}
		})
	}
}

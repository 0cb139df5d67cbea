package schema

import (
	"bytes"
	"encoding/base64"
	"testing"

	"github.com/flakestream/flakestream/codec"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

const (
	moneyProto = `syntax = "proto3";
package shop.common;
message Money { string currency = 1; int64 units = 2; }`
	orderProto = `syntax = "proto3";
package shop;
import "shop/common/money.proto";
import "google/protobuf/timestamp.proto";
message Header { string source = 1; }
message Order {
  string sku = 1;
  shop.common.Money total = 2;
  google.protobuf.Timestamp created = 3;
  string order_no = 4;
  message Line { string sku = 1; int64 order_no = 2; }
  repeated Line lines = 5;
}
message OrderInt { string sku = 1; int64 order_no = 9; }
message OrderU { string sku = 1; uint64 order_no = 9; }
message OrderF { string sku = 1; fixed64 order_no = 9; }
message NoNumber { string sku = 1; }
message WrongType { double order_no = 1; }`
)

// protoSetup registers money.proto and order.proto (importing it through a
// reference) and returns the registry, the order schema id and its
// descriptor.
func protoSetup(t testing.TB) (*testRegistry, int, protoreflect.FileDescriptor) {
	t.Helper()
	r := newRegistry(t)
	r.register(t, "shop/common/money.proto", sr.Schema{Schema: moneyProto, Type: sr.TypeProtobuf})
	id := r.register(t, "orders-value", sr.Schema{Schema: orderProto, Type: sr.TypeProtobuf,
		References: []sr.SchemaReference{{Name: "shop/common/money.proto", Subject: "shop/common/money.proto", Version: 1}}})
	fd := compileProto(t, map[string]string{"order.proto": orderProto, "shop/common/money.proto": moneyProto}, "order.proto")
	return r, id, fd
}

// protoValue frames msg (of the message at index path idx) as schema id.
func protoValue(t testing.TB, id int, idx []int, msg proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	return append(appendFrame(nil, id, idx), b...)
}

func orderMsg(fd protoreflect.FileDescriptor, name string) *dynamicpb.Message {
	md := fd.Messages().ByName(protoreflect.Name(name))
	m := dynamicpb.NewMessage(md)
	m.Set(md.Fields().ByName("sku"), protoreflect.ValueOfString("A-1"))
	return m
}

func TestProtobufAppendsTagAndValue(t *testing.T) {
	r, id, fd := protoSetup(t)
	f := newFormat(t, r, codec.ValueProtobuf, nil)
	for _, tc := range []struct {
		msg  string
		idx  []int
		want func(protoreflect.Value) bool
	}{
		{"Order", []int{1}, func(v protoreflect.Value) bool { return v.String() == "229710323916801" }},
		{"OrderInt", []int{2}, func(v protoreflect.Value) bool { return v.Int() == 229710323916801 }},
		{"OrderU", []int{3}, func(v protoreflect.Value) bool { return v.Uint() == 229710323916801 }},
		{"OrderF", []int{4}, func(v protoreflect.Value) bool { return v.Uint() == 229710323916801 }},
	} {
		t.Run(tc.msg, func(t *testing.T) {
			m := orderMsg(fd, tc.msg)
			if tc.msg == "Order" {
				md := m.Descriptor()
				money := dynamicpb.NewMessage(md.Fields().ByName("total").Message())
				money.Set(money.Descriptor().Fields().ByName("units"), protoreflect.ValueOfInt64(318))
				m.Set(md.Fields().ByName("total"), protoreflect.ValueOfMessage(money))
			}
			value := protoValue(t, id, tc.idx, m)
			out := number(t, f, value, 229710323916801)
			// Header re-framed, indexes and payload kept, the field appended.
			if !bytes.Equal(out[headerLen:len(value)], value[headerLen:]) {
				t.Fatalf("message bytes changed")
			}
			_, off, bad := messageIndexes(out, headerLen)
			if bad != nil {
				t.Fatal(bad)
			}
			got := dynamicpb.NewMessage(m.Descriptor())
			if err := proto.Unmarshal(out[off:], got); err != nil {
				t.Fatal(err)
			}
			if v := got.Get(m.Descriptor().Fields().ByName("order_no")); !tc.want(v) {
				t.Fatalf("order_no = %v", v)
			}
			if got.Get(m.Descriptor().Fields().ByName("sku")).String() != "A-1" {
				t.Fatal("sku lost")
			}
			// The numbered record now passes through with its number.
			insp, err := f.Inspect(ctx, out)
			if err != nil || insp.Kind != codec.HasNumber || insp.Number != 229710323916801 {
				t.Fatalf("re-inspect = %+v %v", insp, err)
			}
		})
	}
	// The output schema is the writer's, registered under the output subject
	// with its reference.
	ss, ok := r.GetSchema("orders-numbered-value", 1)
	if !ok || ss.Schema.Schema != orderProto || len(ss.References) != 1 {
		t.Fatalf("output subject = %+v %v", ss, ok)
	}
}

func TestProtobufExistingNumbers(t *testing.T) {
	r, id, fd := protoSetup(t)
	f := newFormat(t, r, codec.ValueProtobuf, nil)
	m := orderMsg(fd, "Order")
	m.Set(m.Descriptor().Fields().ByName("order_no"), protoreflect.ValueOfString("12"))
	if insp, err := f.Inspect(ctx, protoValue(t, id, []int{1}, m)); err != nil || insp.Kind != codec.HasNumber || insp.Number != 12 {
		t.Fatalf("Inspect = %+v %v, want has 12", insp, err)
	}
	m.Set(m.Descriptor().Fields().ByName("order_no"), protoreflect.ValueOfString("012"))
	if insp, _ := f.Inspect(ctx, protoValue(t, id, []int{1}, m)); insp.Class() != codec.ClassInvalidNumber {
		t.Fatalf("leading zero: class %q", insp.Class())
	}
	mi := orderMsg(fd, "OrderInt")
	mi.Set(mi.Descriptor().Fields().ByName("order_no"), protoreflect.ValueOfInt64(-1))
	if insp, _ := f.Inspect(ctx, protoValue(t, id, []int{2}, mi)); insp.Class() != codec.ClassInvalidNumber {
		t.Fatalf("negative: class %q", insp.Class())
	}
	mu := orderMsg(fd, "OrderU")
	mu.Set(mu.Descriptor().Fields().ByName("order_no"), protoreflect.ValueOfUint64(1<<63))
	if insp, _ := f.Inspect(ctx, protoValue(t, id, []int{3}, mu)); insp.Class() != codec.ClassInvalidNumber {
		t.Fatalf("2^63: class %q", insp.Class())
	}
}

func TestProtobufPresenceAndOneof(t *testing.T) {
	const text = `syntax = "proto3";
package p;
message Opt { optional string order_no = 1; }
message OneOf { oneof id { string order_no = 1; string other = 2; } }`
	r := newRegistry(t)
	id := r.register(t, "p-value", sr.Schema{Schema: text, Type: sr.TypeProtobuf})
	f := newFormat(t, r, codec.ValueProtobuf, nil)
	frame := func(idx int, payload ...byte) []byte {
		return append(appendFrame(nil, id, []int{idx}), payload...)
	}
	// optional: "" is present, and no number.
	if insp, _ := f.Inspect(ctx, frame(0, 0x0a, 0)); insp.Class() != codec.ClassInvalidNumber {
		t.Fatalf("optional empty string: %v %q", insp.Kind, insp.Class())
	}
	// A later member of the oneof replaces the number: none left.
	v := frame(1, 0x0a, 1, '5', 0x12, 1, 'x')
	if insp, _ := f.Inspect(ctx, v); insp.Kind != codec.NeedsNumber {
		t.Fatalf("oneof cleared: %v %q", insp.Kind, insp.Class())
	}
	if insp, _ := f.Inspect(ctx, frame(1, 0x12, 1, 'x', 0x0a, 1, '5')); insp.Kind != codec.HasNumber || insp.Number != 5 {
		t.Fatalf("oneof set last: %+v", insp)
	}
	out := number(t, f, v, 8)
	fd := compileProto(t, map[string]string{"p.proto": text}, "p.proto")
	m := dynamicpb.NewMessage(fd.Messages().ByName("OneOf"))
	if err := proto.Unmarshal(out[len(v)-6:], m); err != nil {
		t.Fatal(err)
	}
	if got := m.Get(m.Descriptor().Fields().ByName("order_no")).String(); got != "8" {
		t.Fatalf("order_no %q after append", got)
	}
}

// A registry may hold a Protobuf schema as a base64 FileDescriptorProto (what
// Confluent's Python serializer registers) rather than .proto text, and
// without json_name, as that serializer writes it.
func TestProtobufSerializedDescriptorSchema(t *testing.T) {
	fd := compileProto(t, map[string]string{"o.proto": `syntax = "proto3"; package s; message Order { string sku = 1; int64 order_no = 2; }`}, "o.proto")
	fdp := protodesc.ToFileDescriptorProto(fd)
	for _, f := range fdp.MessageType[0].Field {
		f.JsonName = nil
	}
	raw, err := proto.Marshal(fdp)
	if err != nil {
		t.Fatal(err)
	}
	r := newRegistry(t)
	id := r.register(t, "o-value", sr.Schema{Schema: base64.StdEncoding.EncodeToString(raw), Type: sr.TypeProtobuf})
	f := newFormat(t, r, codec.ValueProtobuf, nil)
	m := dynamicpb.NewMessage(fd.Messages().Get(0))
	m.Set(fd.Messages().Get(0).Fields().ByName("sku"), protoreflect.ValueOfString("A"))
	out := number(t, f, protoValue(t, id, []int{0}, m), 31)
	if n, ok, err := f.Number(ctx, out); n != 31 || !ok || err != nil {
		t.Fatalf("Number = %d %v %v", n, ok, err)
	}
	if jsonName("order_no") != "orderNo" || jsonName("a__b_c") != "aBC" {
		t.Fatalf("jsonName: %q %q", jsonName("order_no"), jsonName("a__b_c"))
	}
}

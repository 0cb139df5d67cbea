package schema

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/flakestream/flakestream/codec"
	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// A typical order event, the same content in each format (about 200 bytes
// of JSON, 110 of Avro, 120 of Protobuf).
const (
	benchJSON = `{"event":"order_created","customer_id":"c-90211","currency":"CNY",` +
		`"items":[{"sku":"SKU-1029","qty":2,"price":"59.90"},{"sku":"SKU-77","qty":1,"price":"199.00"}],` +
		`"total":"318.80","created_at":"2021-11-12T07:12:47.209Z","channel":"app"}`
	benchAvro = `{"type":"record","name":"OrderCreated","namespace":"shop","fields":[
		{"name":"event","type":"string"},{"name":"customer_id","type":"string"},{"name":"currency","type":"string"},
		{"name":"items","type":{"type":"array","items":{"type":"record","name":"Item","fields":[
			{"name":"sku","type":"string"},{"name":"qty","type":"int"},{"name":"price","type":"string"}]}}},
		{"name":"total","type":"string"},{"name":"created_at","type":{"type":"long","logicalType":"timestamp-millis"}},
		{"name":"channel","type":"string"}%s]}`
	benchProto = `syntax = "proto3";
package shop;
message Item { string sku = 1; int32 qty = 2; string price = 3; }
message OrderCreated {
  string event = 1; string customer_id = 2; string currency = 3; repeated Item items = 4;
  string total = 5; int64 created_at = 6; string channel = 7; string order_no = 8;
}`
)

func benchAvroRecord() map[string]any {
	return map[string]any{"event": "order_created", "customer_id": "c-90211", "currency": "CNY",
		"items": []any{
			map[string]any{"sku": "SKU-1029", "qty": 2, "price": "59.90"},
			map[string]any{"sku": "SKU-77", "qty": 1, "price": "199.00"},
		},
		"total": "318.80", "created_at": int64(1636701167209), "channel": "app", "order_no": nil}
}

// BenchmarkFormat measures one record through Inspect and AppendNumbered
// (what the worker does per record), per format and path. Run the formats
// interleaved with -count and compare medians of pairwise ratios.
func BenchmarkFormat(b *testing.B) {
	r := newRegistry(b)
	withNo := fmtSprintf(benchAvro, `,{"name":"order_no","type":["null","string"],"default":null}`)
	noField := fmtSprintf(benchAvro, "")
	idSplice := r.register(b, "a-value", sr.Schema{Schema: noField})
	idReplace := r.register(b, "b-value", sr.Schema{Schema: withNo})
	idProto := r.register(b, "p-value", sr.Schema{Schema: benchProto, Type: sr.TypeProtobuf})
	avroF := newFormat(b, r, codec.ValueAvro, nil)
	protoF := newFormat(b, r, codec.ValueProtobuf, nil)
	c, err := codec.New(codec.Config{})
	if err != nil {
		b.Fatal(err)
	}
	jsonF := codec.JSONFormat{C: c}

	rec := benchAvroRecord()
	splice := avroValue(b, idSplice, noField, rec)
	replace := avroValue(b, idReplace, withNo, rec)

	fd := compileProto(b, map[string]string{"o.proto": benchProto}, "o.proto")
	md := fd.Messages().ByName("OrderCreated")
	m := dynamicpb.NewMessage(md)
	for _, kv := range [][2]string{{"event", "order_created"}, {"customer_id", "c-90211"}, {"currency", "CNY"},
		{"total", "318.80"}, {"channel", "app"}} {
		m.Set(md.Fields().ByName(protoreflect.Name(kv[0])), protoreflect.ValueOfString(kv[1]))
	}
	m.Set(md.Fields().ByName("created_at"), protoreflect.ValueOfInt64(1636701167209))
	items := m.Mutable(md.Fields().ByName("items")).List()
	for _, it := range [][3]any{{"SKU-1029", int32(2), "59.90"}, {"SKU-77", int32(1), "199.00"}} {
		im := dynamicpb.NewMessage(fd.Messages().ByName("Item"))
		im.Set(im.Descriptor().Fields().ByName("sku"), protoreflect.ValueOfString(it[0].(string)))
		im.Set(im.Descriptor().Fields().ByName("qty"), protoreflect.ValueOfInt32(it[1].(int32)))
		im.Set(im.Descriptor().Fields().ByName("price"), protoreflect.ValueOfString(it[2].(string)))
		items.Append(protoreflect.ValueOfMessage(im))
	}
	pb, _ := proto.Marshal(m)
	protoVal := append(appendFrame(nil, idProto, []int{1}), pb...)

	for _, bc := range []struct {
		name  string
		f     codec.Format
		value []byte
	}{
		{"json", jsonF, []byte(benchJSON)},
		{"avro-splice", avroF, splice},
		{"avro-replace", avroF, replace},
		{"protobuf-append", protoF, protoVal},
	} {
		b.Run(bc.name, func(b *testing.B) {
			dst := make([]byte, 0, 1024)
			b.SetBytes(int64(len(bc.value)))
			b.ReportAllocs()
			for i := int64(0); b.Loop(); i++ {
				insp, err := bc.f.Inspect(ctx, bc.value)
				if err != nil || insp.Kind != codec.NeedsNumber {
					b.Fatalf("%v %v", insp.Kind, err)
				}
				if dst, err = bc.f.AppendNumbered(ctx, dst[:0], bc.value, insp, 229710323916801+i); err != nil {
					b.Fatal(err)
				}
			}
		})
	}

	// The path the walker avoids: decode into Go values with the writer
	// schema, set the field, encode with the output schema.
	b.Run("avro-decode-encode", func(b *testing.B) {
		writer, out := parseAvro(b, noField), parseAvro(b, fmtSprintf(benchAvro, `,{"name":"order_no","type":"string","default":""}`))
		b.SetBytes(int64(len(splice)))
		b.ReportAllocs()
		for i := int64(0); b.Loop(); i++ {
			var v map[string]any
			if err := avro.Unmarshal(writer, splice[headerLen:], &v); err != nil {
				b.Fatal(err)
			}
			v["order_no"] = itoa64(229710323916801 + i)
			p, err := avro.Marshal(out, v)
			if err != nil {
				b.Fatal(err)
			}
			_ = append(appendFrame(nil, 9, nil), p...)
		}
	})
}

func fmtSprintf(format string, a ...any) string { return fmt.Sprintf(format, a...) }

// BenchmarkHostile is the cost bound of the work limits, per record: the
// most expensive values the default limits let through (an Avro array of
// 99,998 nulls beside two fields, a 64-level recursive record, a Protobuf
// message 64 deep) and the hostile ones they refuse (a 401-byte array
// declaring about 130 million nulls, 10,000 levels of recursion).
func BenchmarkHostile(b *testing.B) {
	r := newRegistry(b)
	bomb := r.register(b, "bomb-value", sr.Schema{Schema: nullArray})
	deep := r.register(b, "linked-value", sr.Schema{Schema: linked})
	nodes := r.register(b, "nodes-value", sr.Schema{Schema: nestedProto, Type: sr.TypeProtobuf})
	avroF := newFormat(b, r, codec.ValueAvro, nil)
	protoF := newFormat(b, r, codec.ValueProtobuf, nil)
	most := append(appendFrame(nil, bomb, nil), binary.AppendVarint(nil, codec.DefaultMaxElements-2)...)
	for _, bc := range []struct {
		name  string
		f     *Format
		value []byte
		want  codec.Class
	}{
		{"avro-null-array-at-limit", avroF, append(most, 0, 0), ""},
		{"avro-null-array-401B", avroF, append(appendFrame(nil, bomb, nil), nullBlocks(401-headerLen)...), codec.ClassTooManyElements},
		{"avro-recursion-64", avroF, append(appendFrame(nil, deep, nil), linkedValue(codec.DefaultMaxDepth)...), ""},
		{"avro-recursion-10000", avroF, append(appendFrame(nil, deep, nil), linkedValue(10000)...), codec.ClassTooDeep},
		{"protobuf-nesting-64", protoF, append(appendFrame(nil, nodes, []int{0}), nodeValue(codec.DefaultMaxDepth)...), ""},
		{"protobuf-nesting-10000", protoF, append(appendFrame(nil, nodes, []int{0}), nodeValue(10000)...), codec.ClassTooDeep},
	} {
		b.Run(bc.name, func(b *testing.B) {
			in, err := bc.f.Inspect(ctx, bc.value)
			if err != nil || in.Class() != bc.want {
				b.Fatalf("%v %q %v, want class %q", in.Kind, in.Class(), err, bc.want)
			}
			b.SetBytes(int64(len(bc.value)))
			b.ReportAllocs()
			for b.Loop() {
				_, _ = bc.f.Inspect(ctx, bc.value)
			}
		})
	}
}

package schema

import (
	"context"
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/flakestream/flakestream/codec"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/encoding/protowire"
)

// The demo order: the event the demo and bench commands produce when
// --value-format is avro or protobuf, with the content of their JSON one.
const (
	// DemoAvroSchema is the demo order's Avro writer schema (no number
	// field: the worker adds it).
	DemoAvroSchema = `{"type":"record","name":"OrderCreated","namespace":"flakestream.demo","fields":[` +
		`{"name":"event","type":"string"},{"name":"customer_id","type":"string"},` +
		`{"name":"sku","type":"string"},{"name":"qty","type":"int"},{"name":"total","type":"string"},` +
		`{"name":"created_at","type":{"type":"long","logicalType":"timestamp-millis"}}]}`
	// DemoProtoSchema is the demo order's .proto (message index [0]; the
	// number field, order_no, is declared and left unset).
	DemoProtoSchema = `syntax = "proto3";
package flakestream.demo;
message OrderCreated {
  string event = 1;
  string customer_id = 2;
  string sku = 3;
  int32 qty = 4;
  string total = 5;
  int64 created_at = 6;
  string order_no = 7;
}
`
)

// RegisterDemoSchema registers the demo order schema of format (avro or
// protobuf) under subject and returns its ID.
func RegisterDemoSchema(ctx context.Context, cl *sr.Client, format codec.ValueFormat, subject string) (int, error) {
	s := sr.Schema{Schema: DemoAvroSchema, Type: sr.TypeAvro}
	switch format {
	case codec.ValueAvro:
	case codec.ValueProtobuf:
		s = sr.Schema{Schema: DemoProtoSchema, Type: sr.TypeProtobuf}
	default:
		return 0, fmt.Errorf("schema: no demo schema for value format %q: %w", format, codec.ErrInvalidConfig)
	}
	id, err := cl.RegisterSchema(ctx, subject, s, -1, -1)
	if err != nil {
		return 0, classify(ctx, "register the demo schema under subject "+strconv.Quote(subject), err)
	}
	return id, nil
}

// firstMessage is the message-index path of the demo's one message type.
var firstMessage = []int{0}

// AppendDemoOrder appends demo order i, framed for schema id (as returned
// by RegisterDemoSchema for format), to dst. It does not allocate when dst
// has room.
func AppendDemoOrder(dst []byte, format codec.ValueFormat, id, i int, unixMs int64) []byte {
	var num [20]byte
	customer := append(append(num[:0], "c-"...), strconv.AppendInt(num[2:2], int64(90000+i%1000), 10)...)
	if format == codec.ValueProtobuf {
		dst = appendFrame(dst, id, firstMessage)
		dst = protowire.AppendTag(dst, 1, protowire.BytesType)
		dst = protowire.AppendString(dst, "order_created")
		dst = protowire.AppendTag(dst, 2, protowire.BytesType)
		dst = protowire.AppendBytes(dst, customer)
		dst = protowire.AppendTag(dst, 3, protowire.BytesType)
		dst = protowire.AppendString(dst, "SKU-1029")
		dst = protowire.AppendTag(dst, 4, protowire.VarintType)
		dst = protowire.AppendVarint(dst, uint64(1+i%5))
		dst = protowire.AppendTag(dst, 5, protowire.BytesType)
		dst = protowire.AppendString(dst, "318.80")
		dst = protowire.AppendTag(dst, 6, protowire.VarintType)
		return protowire.AppendVarint(dst, uint64(unixMs))
	}
	dst = appendFrame(dst, id, nil)
	str := func(dst []byte, s string) []byte { return append(binary.AppendVarint(dst, int64(len(s))), s...) }
	dst = str(dst, "order_created")
	dst = append(binary.AppendVarint(dst, int64(len(customer))), customer...)
	dst = str(dst, "SKU-1029")
	dst = binary.AppendVarint(dst, int64(1+i%5))
	dst = str(dst, "318.80")
	return binary.AppendVarint(dst, unixMs)
}

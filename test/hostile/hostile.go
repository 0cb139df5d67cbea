// Package hostile holds the hostile schemas and values of the test kit:
// what a producer that may register a schema, and write any value, sends
// to cost a schema-registry reader more than its bytes suggest. The codec's
// limit tests and benchmarks and the fault suite's poison storm share them.
package hostile

import (
	"encoding/binary"

	"google.golang.org/protobuf/encoding/protowire"
)

const (
	// NullArrayAvro is an Avro record whose array of null costs no byte
	// per item, so its count is all an attacker needs to write.
	NullArrayAvro = `{"type":"record","name":"Bomb","fields":[
		{"name":"xs","type":{"type":"array","items":"null"}},
		{"name":"order_no","type":["null","string"],"default":null}]}`
	// LinkedAvro is a recursive Avro record, so the value chooses the
	// depth.
	LinkedAvro = `{"type":"record","name":"L","fields":[
		{"name":"order_no","type":["null","string"],"default":null},
		{"name":"next","type":["null","L"],"default":null}]}`
	// NodesProto is a recursive Protobuf message with a packed field.
	NodesProto = `syntax = "proto3";
package hostile;
message Node {
  string order_no = 1;
  Node child = 2;
  repeated int64 xs = 3;
}`
)

// NullBlocks is the payload of a NullArrayAvro value of size bytes: blocks
// of 2^20 nulls (four bytes each; one-null blocks to fill the rest) and
// the end of the array, then a null order_no. 396 bytes declare about a
// hundred million nulls.
func NullBlocks(size int) []byte {
	var b []byte
	for len(b)+2 < size {
		if size-2-len(b) >= 4 {
			b = binary.AppendVarint(b, 1<<20)
		} else {
			b = binary.AppendVarint(b, 1)
		}
	}
	return append(b, 0, 0)
}

// LinkedValue is a LinkedAvro value nested levels deep: every level holds
// a null order_no and, but the last, a next record.
func LinkedValue(levels int) []byte {
	b := make([]byte, 0, 2*levels)
	for i := range levels {
		b = append(b, 0) // order_no: null
		if i < levels-1 {
			b = append(b, 2) // next: the branch L (zig-zag 1)
		} else {
			b = append(b, 0) // next: null
		}
	}
	return b
}

// NodeValue is a NodesProto Node nested levels deep, built inside out.
func NodeValue(levels int) []byte {
	var inner []byte
	for i := 1; i < levels; i++ {
		inner = protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), inner)
	}
	return inner
}

// PackedValue is a NodesProto Node whose packed field xs holds items
// ones: one element per byte.
func PackedValue(items int) []byte {
	packed := make([]byte, items)
	for i := range packed {
		packed[i] = 1
	}
	return protowire.AppendBytes(protowire.AppendTag(nil, 3, protowire.BytesType), packed)
}

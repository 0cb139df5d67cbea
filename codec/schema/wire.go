package schema

import (
	"encoding/binary"

	"github.com/flakestream/flakestream/codec"
)

// headerLen is the Confluent header: magic byte 0 and a big-endian uint32
// schema ID.
const headerLen = 5

// schemaID returns the schema ID of a framed value, or why it is not framed.
func schemaID(value []byte) (int, *codec.InputError) {
	if len(value) < headerLen {
		return 0, &codec.InputError{Class: codec.ClassNotFramed, Offset: len(value),
			Msg: "value is shorter than the 5-byte wire-format header (magic byte 0, 4-byte schema id)"}
	}
	if value[0] != 0 {
		return 0, &codec.InputError{Class: codec.ClassNotFramed, Offset: 0,
			Msg: "value does not start with the wire format's magic byte 0"}
	}
	id := binary.BigEndian.Uint32(value[1:headerLen])
	if id > 1<<31-1 {
		return 0, &codec.InputError{Class: codec.ClassNotFramed, Offset: 1, Msg: "schema id is above 2^31-1"}
	}
	return int(id), nil
}

// appendHeader appends the header for schema id.
func appendHeader(dst []byte, id int) []byte {
	return append(dst, 0, byte(id>>24), byte(id>>16), byte(id>>8), byte(id))
}

// maxIndexDepth bounds the message-index path of a Protobuf value: messages
// nested deeper than this are not worth a dead letter's worth of CPU.
const maxIndexDepth = 32

// messageIndexes reads the Protobuf message-index path that follows the
// header at b[off:], into idx (no allocation when it is big enough). It
// returns the path and the offset of the payload. A count of 0 is the
// shortcut for [0].
func messageIndexes(b []byte, off int, idx []int) ([]int, int, *codec.InputError) {
	bad := func(at int, msg string) ([]int, int, *codec.InputError) {
		return nil, 0, &codec.InputError{Class: codec.ClassNotFramed, Offset: at, Msg: msg}
	}
	n, w := binary.Varint(b[off:])
	if w <= 0 {
		return bad(off, "protobuf message indexes are missing or malformed")
	}
	off += w
	idx = idx[:0]
	if n == 0 {
		return append(idx, 0), off, nil
	}
	if n < 0 || n > maxIndexDepth {
		return bad(off-w, "protobuf message-index count is negative or above 32")
	}
	for range n {
		v, w := binary.Varint(b[off:])
		if w <= 0 || v < 0 || v > 1<<31-1 {
			return bad(off, "protobuf message index is malformed or negative")
		}
		idx = append(idx, int(v))
		off += w
	}
	return idx, off, nil
}

// appendIndexes appends a message-index path as the Confluent serializers
// write it: [0] as the single byte 0.
func appendIndexes(dst []byte, idx []int) []byte {
	if len(idx) == 1 && idx[0] == 0 {
		return append(dst, 0)
	}
	dst = binary.AppendVarint(dst, int64(len(idx)))
	for _, i := range idx {
		dst = binary.AppendVarint(dst, int64(i))
	}
	return dst
}

package schema

import (
	"math"

	"github.com/flakestream/flakestream/codec"
	"github.com/twmb/franz-go/pkg/sr"
)

// headerLen is the Confluent header: magic byte 0 and a big-endian uint32
// schema ID.
const headerLen = 5

// confluent reads and writes the Confluent wire format's header (magic byte,
// schema ID) and Protobuf message indexes: franz-go's own, so the framing
// is the one every pkg/sr serde writes.
var confluent sr.ConfluentHeader

// schemaID returns the schema ID of a framed value, or why it is not framed.
func schemaID(value []byte) (int, *codec.InputError) {
	id, _, err := confluent.DecodeID(value)
	switch {
	case err != nil && len(value) < headerLen:
		return 0, &codec.InputError{Class: codec.ClassNotFramed, Offset: len(value),
			Msg: "value is shorter than the 5-byte wire-format header (magic byte 0, 4-byte schema id)"}
	case err != nil:
		return 0, &codec.InputError{Class: codec.ClassNotFramed, Offset: 0,
			Msg: "value does not start with the wire format's magic byte 0"}
	case id > math.MaxInt32:
		return 0, &codec.InputError{Class: codec.ClassNotFramed, Offset: 1, Msg: "schema id is above 2^31-1"}
	}
	return id, nil
}

// appendFrame appends the header for schema id and, for Protobuf, the
// message-index path idx (nil for Avro): [0] as the single byte 0, as the
// Confluent serializers write it.
func appendFrame(dst []byte, id int, idx []int) []byte {
	dst, _ = confluent.AppendEncode(dst, id, idx) // its error is always nil
	return dst
}

// maxIndexDepth bounds the message-index path of a Protobuf value: messages
// nested deeper than this are not worth a dead letter's worth of CPU.
const maxIndexDepth = 32

// messageIndexes reads the Protobuf message-index path that follows the
// header at b[off:]. It returns the path and the offset of the payload. A
// count of 0 is the shortcut for [0].
func messageIndexes(b []byte, off int) ([]int, int, *codec.InputError) {
	idx, rest, err := confluent.DecodeIndex(b[off:], maxIndexDepth)
	if err != nil {
		return nil, 0, &codec.InputError{Class: codec.ClassNotFramed, Offset: off,
			Msg: "protobuf message indexes are missing, malformed, negative in count or more than 32"}
	}
	for _, i := range idx {
		if i < 0 || i > math.MaxInt32 {
			return nil, 0, &codec.InputError{Class: codec.ClassNotFramed, Offset: off,
				Msg: "protobuf message index is negative or above 2^31-1"}
		}
	}
	return idx, len(b) - len(rest), nil
}

package schema

import (
	"encoding/binary"
	"errors"

	"github.com/hamba/avro/v2"
)

// The Avro binary walker: it checks that bytes decode with a schema and
// finds where a top-level field's encoding lies, without building any value
// and without allocating. It is the reason no record is ever decoded into Go
// values and encoded again.

var (
	errShort     = errors.New("payload ends inside a value")
	errVarint    = errors.New("malformed varint")
	errBool      = errors.New("boolean is neither 0 nor 1")
	errLength    = errors.New("negative or oversized length")
	errUnion     = errors.New("union branch index out of range")
	errEnum      = errors.New("enum index out of range")
	errTrailing  = errors.New("bytes left after the record")
	errUnsupport = errors.New("schema type not supported")
	errInt       = errors.New("int is wider than 32 bits or longer than 5 bytes")
)

// readLong reads a long at b[i:]: Avro's zig-zag varint, which is
// encoding/binary's Varint.
func readLong(b []byte, i int) (int64, int, error) {
	v, w := binary.Varint(b[i:])
	if w <= 0 {
		if w == 0 {
			return 0, i, errShort
		}
		return 0, i, errVarint
	}
	return v, i + w, nil
}

// readInt reads an int at b[i:]: a long that fits 32 bits in at most 5
// bytes, as Avro's Java reader requires (it refuses a longer encoding, even
// of a small value). The spec encodes a union's branch and an enum's
// symbol as an int too.
func readInt(b []byte, i int) (int32, int, error) {
	v, j, err := readLong(b, i)
	if err == nil && (j-i > 5 || v != int64(int32(v))) {
		err = errInt
	}
	return int32(v), j, err
}

// readLen reads a length that must fit in what is left of b.
func readLen(b []byte, i int) (int, int, error) {
	n, j, err := readLong(b, i)
	if err != nil {
		return 0, i, err
	}
	if n < 0 || n > int64(len(b)-j) {
		return 0, i, errLength
	}
	return int(n), j, nil
}

// skip returns the offset just past the value of schema s at b[i:], a
// value inside a container at level: it counts as one element, and a
// record, array or map opens level+1. A union and a named reference are
// the value they choose, not a level or an element of their own.
func skip(b []byte, i int, s avro.Schema, level int, lim *budget) (int, error) {
	switch t := s.(type) {
	case *avro.RefSchema:
		return skip(b, i, t.Schema(), level, lim)
	case *avro.UnionSchema:
		k, j, err := readInt(b, i)
		if err != nil {
			return i, err
		}
		types := t.Types()
		if k < 0 || int(k) >= len(types) {
			return i, errUnion
		}
		return skip(b, j, types[k], level, lim)
	}
	if err := lim.take(1); err != nil {
		return i, err
	}
	switch s := s.(type) {
	case *avro.RecordSchema:
		if err := lim.open(level + 1); err != nil {
			return i, err
		}
		var err error
		for _, f := range s.Fields() {
			if i, err = skip(b, i, f.Type(), level+1, lim); err != nil {
				return i, err
			}
		}
		return i, nil
	case *avro.ArraySchema:
		if err := lim.open(level + 1); err != nil {
			return i, err
		}
		return skipBlocks(b, i, s.Items(), false, level+1, lim)
	case *avro.MapSchema:
		if err := lim.open(level + 1); err != nil {
			return i, err
		}
		return skipBlocks(b, i, s.Values(), true, level+1, lim)
	case *avro.EnumSchema:
		k, j, err := readInt(b, i)
		if err != nil {
			return i, err
		}
		if k < 0 || int(k) >= len(s.Symbols()) {
			return i, errEnum
		}
		return j, nil
	case *avro.FixedSchema:
		if s.Size() > len(b)-i {
			return i, errShort
		}
		return i + s.Size(), nil
	case *avro.NullSchema:
		return i, nil
	case *avro.PrimitiveSchema:
		return skipPrimitive(b, i, s.Type())
	}
	return i, errUnsupport
}

// skipPrimitive returns the offset just past a value of primitive type t
// at b[i:], checking what the type allows (a boolean is 0 or 1, an int
// fits 32 bits).
func skipPrimitive(b []byte, i int, t avro.Type) (int, error) {
	switch t {
	case avro.Null:
		return i, nil
	case avro.Boolean:
		if i >= len(b) {
			return i, errShort
		}
		if b[i] > 1 {
			return i, errBool
		}
		return i + 1, nil
	case avro.Int:
		_, j, err := readInt(b, i)
		return j, err
	case avro.Long:
		_, j, err := readLong(b, i)
		return j, err
	case avro.Float:
		if len(b)-i < 4 {
			return i, errShort
		}
		return i + 4, nil
	case avro.Double:
		if len(b)-i < 8 {
			return i, errShort
		}
		return i + 8, nil
	case avro.String, avro.Bytes:
		n, j, err := readLen(b, i)
		if err != nil {
			return i, err
		}
		return j + n, nil
	}
	return i, errUnsupport
}

// skipBlocks skips an array's or map's blocks, the container at level:
// a count, (for a negative count, a byte size), the items (for a map each
// after its string key), until a count of 0. A block's count is taken from
// the budget before any item is read, so a hostile count (an array of
// null costs no byte per item) is refused at once, not walked.
func skipBlocks(b []byte, i int, items avro.Schema, keyed bool, level int, lim *budget) (int, error) {
	for {
		n, j, err := readLong(b, i)
		if err != nil {
			return i, err
		}
		i = j
		if n == 0 {
			return i, nil
		}
		if n < 0 {
			if n = -n; n < 0 { // the count was MinInt64
				return i, errLength
			}
			if _, i, err = readLen(b, i); err != nil { // block size in bytes: walked anyway
				return i, err
			}
		}
		// Every item takes at least a byte unless its type is empty, so a
		// count beyond the bytes left is corrupt.
		if n > int64(len(b)-i) && !zeroWidth(items) {
			return i, errLength
		}
		// Items are counted as they are read (skip takes one each); this
		// refuses a count the budget cannot hold before reading any.
		if n > int64(lim.left) {
			return i, lim.take(n)
		}
		for range n {
			if keyed {
				if i, err = skipPrimitive(b, i, avro.String); err != nil {
					return i, err
				}
			}
			if i, err = skip(b, i, items, level, lim); err != nil {
				return i, err
			}
		}
	}
}

func zeroWidth(s avro.Schema) bool {
	switch s := s.(type) {
	case *avro.NullSchema:
		return true
	case *avro.PrimitiveSchema:
		return s.Type() == avro.Null
	case *avro.FixedSchema:
		return s.Size() == 0
	}
	return false
}

// walkRecord checks that b is exactly one encoding of rec, the top-level
// record (level 1), within the limits of lim, and returns where field
// want's encoding starts and ends (-1, -1 for want < 0).
func walkRecord(b []byte, rec *avro.RecordSchema, want int, lim budget) (start, end int, at int, err error) {
	start, end = -1, -1
	i := 0
	for k, f := range rec.Fields() {
		j, err := skip(b, i, f.Type(), 1, &lim)
		if err != nil {
			return -1, -1, j, err
		}
		if k == want {
			start, end = i, j
		}
		i = j
	}
	if i != len(b) {
		return -1, -1, i, errTrailing
	}
	return start, end, 0, nil
}

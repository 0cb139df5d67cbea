package schema

import (
	"errors"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// The Protobuf wire walker: it checks that bytes decode as a message type,
// as proto.Unmarshal would, and finds the last occurrence of the number
// field, without building a message and without allocating. A field whose
// wire type does not match its declaration is kept as an unknown field, as
// protobuf-go does.

var (
	errProtoUTF8        = errors.New("string field is not valid utf-8")
	errProtoFieldNumber = errors.New("field number above 2^29-1")
)

// wireType is the wire type a field of kind k is written with (unpacked).
func wireType(k protoreflect.Kind) protowire.Type {
	switch k {
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind, protoreflect.FloatKind:
		return protowire.Fixed32Type
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind, protoreflect.DoubleKind:
		return protowire.Fixed64Type
	case protoreflect.StringKind, protoreflect.BytesKind, protoreflect.MessageKind:
		return protowire.BytesType
	case protoreflect.GroupKind:
		return protowire.StartGroupType
	}
	return protowire.VarintType
}

// checkUTF8 reports whether strings of fd must be UTF-8: proto3 and
// editions (whose default is to verify), not proto2.
func checkUTF8(fd protoreflect.FieldDescriptor) bool {
	return fd.Kind() == protoreflect.StringKind && fd.Syntax() != protoreflect.Proto2
}

// protoField is the last occurrence of a field in a message's bytes.
type protoField struct {
	found bool
	typ   protowire.Type
	v     uint64 // varint or fixed value
	b     []byte // bytes value
}

// protoTable is a message type's fields by number, built once per type so
// the walk makes no descriptor calls (a descriptor method call per field
// cost half the walk's time).
type protoTable struct {
	dense  []*fieldInfo // by field number, for small numbers
	sparse map[protowire.Number]*fieldInfo
}

type fieldInfo struct {
	wt     protowire.Type
	packed bool // a packable repeated field: BytesType is accepted too
	kind   protoreflect.Kind
	utf8   bool
	msg    *protoTable // for a message (or map entry) field
	oneof  protoreflect.OneofDescriptor
}

const maxDense = 128

// newProtoTable builds the tables of md and every message type it reaches;
// seen ties recursive types together.
func newProtoTable(md protoreflect.MessageDescriptor, seen map[protoreflect.FullName]*protoTable) *protoTable {
	if t := seen[md.FullName()]; t != nil {
		return t
	}
	t := &protoTable{}
	seen[md.FullName()] = t
	fields := md.Fields()
	top := 0
	for i := range fields.Len() {
		if n := int(fields.Get(i).Number()); n < maxDense && n > top {
			top = n
		}
	}
	t.dense = make([]*fieldInfo, top+1)
	for i := range fields.Len() {
		fd := fields.Get(i)
		fi := &fieldInfo{wt: wireType(fd.Kind()), packed: fd.IsList() && isPackable(fd.Kind()),
			kind: fd.Kind(), utf8: checkUTF8(fd), oneof: fd.ContainingOneof()}
		if fd.Kind() == protoreflect.MessageKind {
			fi.msg = newProtoTable(fd.Message(), seen)
		}
		if n := fd.Number(); int(n) < len(t.dense) {
			t.dense[n] = fi
		} else {
			if t.sparse == nil {
				t.sparse = map[protowire.Number]*fieldInfo{}
			}
			t.sparse[n] = fi
		}
	}
	return t
}

func (t *protoTable) field(n protowire.Number) *fieldInfo {
	if int(n) < len(t.dense) {
		return t.dense[n]
	}
	return t.sparse[n]
}

// walkProto checks b as a message of table t, at level (the top-level
// message is 1), within the limits of lim, and records the last
// occurrence of field number want (0 for none) at the top level. A later
// member of want's oneof clears it, as it would in a decoded message.
// Every field occurrence counts as an element, and every item of a packed
// field.
func walkProto(b []byte, t *protoTable, want protowire.Number, level int, lim *budget) (protoField, int, error) {
	var (
		last  protoField
		oneof protoreflect.OneofDescriptor
	)
	if err := lim.open(level); err != nil {
		return last, 0, err
	}
	if want != 0 {
		if fi := t.field(want); fi != nil {
			oneof = fi.oneof
		}
	}
	at := 0
	for at < len(b) {
		num, typ, n := protowire.ConsumeTag(b[at:])
		if n < 0 {
			return last, at, protowire.ParseError(n)
		}
		if num > protowire.MaxValidNumber { // ConsumeTag checks only the minimum
			return last, at, errProtoFieldNumber
		}
		if err := lim.take(1); err != nil {
			return last, at, err
		}
		start := at
		at += n
		fi := t.field(num)
		if fi == nil || !(typ == fi.wt || (typ == protowire.BytesType && fi.packed)) {
			m := protowire.ConsumeFieldValue(num, typ, b[at:])
			if m < 0 {
				return last, at, protowire.ParseError(m)
			}
			at += m
			continue
		}
		f, next, err := readProtoValue(b, start, at, num, typ, fi, level, lim)
		if err != nil {
			return last, next, err
		}
		at = next
		switch {
		case num == want:
			last = f
		case oneof != nil && fi.oneof == oneof:
			last = protoField{}
		}
	}
	return last, 0, nil
}

// readProtoValue reads the value of known field fi whose tag began at
// b[start:] and ended at b[at:]: a scalar's value, or a length-delimited
// value checked as what the field holds (packed scalars, a nested message,
// UTF-8 text). It returns the field and the offset past its value, or the
// offset an error is reported at.
func readProtoValue(b []byte, start, at int, num protowire.Number, typ protowire.Type, fi *fieldInfo, level int, lim *budget) (protoField, int, error) {
	f := protoField{found: true, typ: typ}
	m := 0
	switch typ {
	case protowire.VarintType:
		f.v, m = protowire.ConsumeVarint(b[at:])
	case protowire.Fixed32Type:
		var v uint32
		v, m = protowire.ConsumeFixed32(b[at:])
		f.v = uint64(v)
	case protowire.Fixed64Type:
		f.v, m = protowire.ConsumeFixed64(b[at:])
	case protowire.StartGroupType:
		m = protowire.ConsumeFieldValue(num, typ, b[at:])
	case protowire.BytesType:
		f.b, m = protowire.ConsumeBytes(b[at:])
	}
	if m < 0 {
		return protoField{}, at, protowire.ParseError(m)
	}
	at += m
	if typ != protowire.BytesType {
		return f, at, nil
	}
	switch {
	case fi.packed:
		if err := walkPacked(f.b, fi.kind, lim); err != nil {
			return protoField{}, start, err
		}
	case fi.msg != nil:
		if _, off, err := walkProto(f.b, fi.msg, 0, level+1, lim); err != nil {
			return protoField{}, at - len(f.b) + off, err
		}
	case fi.utf8 && !utf8.Valid(f.b):
		return protoField{}, start, errProtoUTF8
	}
	return f, at, nil
}

func isPackable(k protoreflect.Kind) bool {
	switch k {
	case protoreflect.StringKind, protoreflect.BytesKind, protoreflect.MessageKind, protoreflect.GroupKind:
		return false
	}
	return true
}

// walkPacked checks a packed repeated field's contents and counts its
// items.
func walkPacked(b []byte, k protoreflect.Kind, lim *budget) error {
	size := 0
	switch wireType(k) {
	case protowire.Fixed32Type:
		size = 4
	case protowire.Fixed64Type:
		size = 8
	}
	if size > 0 {
		if len(b)%size != 0 {
			return protowire.ParseError(-1)
		}
		return lim.take(int64(len(b) / size))
	}
	for len(b) > 0 {
		if err := lim.take(1); err != nil {
			return err
		}
		_, n := protowire.ConsumeVarint(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
	}
	return nil
}

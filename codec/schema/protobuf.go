package schema

import (
	"context"
	"encoding/base64"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/bufbuild/protocompile"
	"github.com/flakestream/flakestream/codec"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
)

// protoPlan is what one Protobuf writer schema (a .proto file) needs.
type protoPlan struct {
	file protoreflect.FileDescriptor
	out  sr.Schema
	s    *Settings

	mu   sync.RWMutex
	msgs map[string]*protoMsg // by the value's raw message-index bytes
}

// protoMsg is one message type of the file, as a message-index path names it.
type protoMsg struct {
	md      protoreflect.MessageDescriptor
	fd      protoreflect.FieldDescriptor // the number field, nil when lacking
	table   *protoTable
	subject string
	bad     *codec.InputError // no such message, or no usable number field
	outID   atomic.Int64      // see cache.outputID
	lim     budget            // one walk's limits, copied for each
}

// newProtoPlan compiles the writer's .proto text with its references (each
// under its reference name, the import path) and the well-known imports.
func newProtoPlan(w *writer, s *Settings) (*protoPlan, *codec.InputError) {
	main := fmt.Sprintf("flakestream-schema-%d.proto", w.id)
	srcs := map[string]string{main: w.text.Schema}
	for _, r := range w.refs {
		srcs[r.name] = r.Schema.Schema
	}
	comp := protocompile.Compiler{
		Resolver: protocompile.WithStandardImports(protocompile.ResolverFunc(func(path string) (protocompile.SearchResult, error) {
			src, ok := srcs[path]
			if !ok {
				return protocompile.SearchResult{}, fmt.Errorf("%q is neither a reference of schema %d nor a well-known import", path, w.id)
			}
			if fdp := serializedDescriptor(src); fdp != nil {
				fdp.Name = proto.String(path)
				return protocompile.SearchResult{Proto: fdp}, nil
			}
			return protocompile.SearchResult{Source: strings.NewReader(src)}, nil
		})),
	}
	files, err := comp.Compile(context.Background(), main)
	if err != nil {
		return nil, &codec.InputError{Class: codec.ClassUnknownSchema, Offset: 1,
			Msg: fmt.Sprintf("schema id %d does not compile as Protobuf: %v", w.id, err)}
	}
	return &protoPlan{file: files[0], s: s, msgs: map[string]*protoMsg{},
		out: sr.Schema{Schema: w.text.Schema, Type: sr.TypeProtobuf, References: w.text.References}}, nil
}

// serializedDescriptor returns the FileDescriptorProto that src encodes in
// base64, or nil if src is not one. Registries store a Protobuf schema as
// .proto text or in this serialized form (the one Confluent's Python and
// other serializers register, and ?format=serialized returns).
func serializedDescriptor(src string) *descriptorpb.FileDescriptorProto {
	src = strings.TrimSpace(src)
	if src == "" || strings.ContainsAny(src, " \t\n{;") {
		return nil
	}
	raw, err := base64.StdEncoding.DecodeString(src)
	if err != nil {
		return nil
	}
	fdp := new(descriptorpb.FileDescriptorProto)
	if proto.Unmarshal(raw, fdp) != nil || (len(fdp.MessageType) == 0 && fdp.Name == nil) {
		return nil
	}
	for _, m := range fdp.MessageType {
		fillJSONNames(m)
	}
	return fdp
}

// fillJSONNames sets every field's json_name that is unset to protoc's
// default. protoc always writes it; protocompile expects it in a descriptor
// it did not compile, and serializers such as Confluent's Python one
// register descriptors without it.
func fillJSONNames(m *descriptorpb.DescriptorProto) {
	for _, f := range m.Field {
		if f.GetJsonName() == "" {
			f.JsonName = proto.String(jsonName(f.GetName()))
		}
	}
	for _, n := range m.NestedType {
		fillJSONNames(n)
	}
}

// jsonName is protoc's default JSON name: underscores dropped, the letter
// after each one upper-cased.
func jsonName(name string) string {
	b := make([]byte, 0, len(name))
	up := false
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '_':
			up = true
		case up && 'a' <= c && c <= 'z':
			b = append(b, c-'a'+'A')
			up = false
		default:
			b = append(b, c)
			up = false
		}
	}
	return string(b)
}

// message returns the message type that the (valid) index bytes name.
func (p *protoPlan) message(raw []byte) *protoMsg {
	p.mu.RLock()
	m, ok := p.msgs[string(raw)]
	p.mu.RUnlock()
	if ok {
		return m
	}
	path, _, _ := messageIndexes(raw, 0)
	m = p.resolve(path)
	p.mu.Lock()
	p.msgs[string(raw)] = m
	p.mu.Unlock()
	return m
}

func (p *protoPlan) resolve(path []int) *protoMsg {
	msgs := p.file.Messages()
	var md protoreflect.MessageDescriptor
	for depth, i := range path {
		if i >= msgs.Len() {
			return &protoMsg{bad: &codec.InputError{Class: codec.ClassUndecodable, Offset: headerLen,
				Msg: fmt.Sprintf("message index %v names no message of the schema (level %d has %d)", path, depth, msgs.Len())}}
		}
		md = msgs.Get(i)
		msgs = md.Messages()
	}
	m := &protoMsg{md: md, subject: p.s.Strategy.subject(p.s.OutputTopic, string(md.FullName())), lim: newBudget(p.s),
		table: newProtoTable(md, map[protoreflect.FullName]*protoTable{})}
	fd := md.Fields().ByName(protoreflect.Name(p.s.Field))
	switch {
	case fd == nil:
		m.bad = &codec.InputError{Class: codec.ClassNoNumberField, Offset: headerLen,
			Msg: fmt.Sprintf("message %s has no field %q", md.FullName(), p.s.Field)}
	case fd.IsList() || fd.IsMap() || !numberKind(fd.Kind()):
		m.bad = &codec.InputError{Class: codec.ClassNoNumberField, Offset: headerLen,
			Msg: fmt.Sprintf("message %s field %q is %s: want a singular int64, uint64, fixed64 or string",
				md.FullName(), p.s.Field, kindName(fd))}
	default:
		m.fd = fd
	}
	return m
}

func numberKind(k protoreflect.Kind) bool {
	switch k {
	case protoreflect.Int64Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind, protoreflect.StringKind:
		return true
	}
	return false
}

func kindName(fd protoreflect.FieldDescriptor) string {
	switch {
	case fd.IsMap():
		return "a map"
	case fd.IsList():
		return "repeated " + fd.Kind().String()
	}
	return fd.Kind().String()
}

// inspect says whether the message needs a number. The payload is walked,
// not decoded: see walkProto.
func (m *protoMsg) inspect(payload []byte, off int, s *Settings) (codec.Kind, int64, *codec.InputError) {
	lim := m.lim
	f, at, err := walkProto(payload, m.table, m.fd.Number(), 1, &lim)
	if err != nil {
		return codec.Bad, 0, walkError(err, off+at, "as "+string(m.md.FullName()))
	}
	if !f.found {
		return codec.NeedsNumber, 0, nil
	}
	// Without explicit presence (a proto3 scalar) the zero value is "unset".
	presence := m.fd.HasPresence()
	var (
		n   int64
		why string
	)
	switch m.fd.Kind() {
	case protoreflect.StringKind:
		if len(f.b) == 0 && !presence {
			return codec.NeedsNumber, 0, nil
		}
		var err error
		if n, err = codec.ParseNumber(f.b); err != nil {
			why = err.Error()
		}
	case protoreflect.Int64Kind:
		if f.v == 0 && !presence {
			return codec.NeedsNumber, 0, nil
		}
		if n = int64(f.v); n < 0 {
			why = "holds a negative number, want 0..9223372036854775807"
		}
	default:
		if f.v == 0 && !presence {
			return codec.NeedsNumber, 0, nil
		}
		if f.v > math.MaxInt64 {
			why = "holds a number above 9223372036854775807"
		}
		n = int64(f.v)
	}
	if why == "" && s.Valid != nil {
		if err := s.Valid(n); err != nil {
			return codec.Bad, 0, &codec.InputError{Class: codec.ClassInvalidNumber, Offset: off,
				Msg: fmt.Sprintf("field %q: number rejected by the configured check", s.Field), Err: err}
		}
	}
	if why != "" {
		return codec.Bad, 0, &codec.InputError{Class: codec.ClassInvalidNumber, Offset: off,
			Msg: fmt.Sprintf("field %q: %s", s.Field, why)}
	}
	return codec.HasNumber, n, nil
}

// appendNumber appends the field's tag and value: for a singular scalar the
// last occurrence on the wire wins, so the message needs no re-encoding.
func (m *protoMsg) appendNumber(dst []byte, id int64) []byte {
	num := m.fd.Number()
	switch m.fd.Kind() {
	case protoreflect.StringKind:
		var buf [20]byte
		dst = protowire.AppendTag(dst, num, protowire.BytesType)
		return protowire.AppendBytes(dst, strconv.AppendInt(buf[:0], id, 10))
	case protoreflect.Fixed64Kind:
		dst = protowire.AppendTag(dst, num, protowire.Fixed64Type)
		return protowire.AppendFixed64(dst, uint64(id))
	}
	dst = protowire.AppendTag(dst, num, protowire.VarintType)
	return protowire.AppendVarint(dst, uint64(id))
}

// fieldValue reads the top-level field name as key bytes, walking the
// payload as inspect does (the last occurrence wins; a zero value without
// explicit presence is unset).
func (m *protoMsg) fieldValue(payload []byte, off int, name string) ([]byte, bool, *codec.InputError) {
	md := m.md
	fd := md.Fields().ByName(protoreflect.Name(name))
	if fd == nil {
		return nil, false, nil
	}
	if fd.IsList() || fd.IsMap() {
		return nil, false, &codec.InputError{Class: codec.ClassMissingKey, Offset: off,
			Msg: fmt.Sprintf("field %q is %s, want a singular string, bytes, integer or enum", name, kindName(fd))}
	}
	lim := m.lim
	f, at, err := walkProto(payload, m.table, fd.Number(), 1, &lim)
	if err != nil {
		return nil, false, walkError(err, off+at, "as "+string(md.FullName()))
	}
	if !f.found || (!fd.HasPresence() && f.v == 0 && len(f.b) == 0) {
		return nil, false, nil
	}
	switch fd.Kind() {
	case protoreflect.StringKind, protoreflect.BytesKind:
		return f.b, true, nil
	case protoreflect.Int32Kind, protoreflect.Sfixed32Kind:
		return strconv.AppendInt(nil, int64(int32(f.v)), 10), true, nil
	case protoreflect.Int64Kind, protoreflect.Sfixed64Kind:
		return strconv.AppendInt(nil, int64(f.v), 10), true, nil
	case protoreflect.Sint32Kind, protoreflect.Sint64Kind:
		return strconv.AppendInt(nil, protowire.DecodeZigZag(f.v), 10), true, nil
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return strconv.AppendUint(nil, uint64(uint32(f.v)), 10), true, nil
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return strconv.AppendUint(nil, f.v, 10), true, nil
	case protoreflect.EnumKind:
		if ev := fd.Enum().Values().ByNumber(protoreflect.EnumNumber(int32(f.v))); ev != nil {
			return []byte(ev.Name()), true, nil
		}
		return strconv.AppendInt(nil, int64(int32(f.v)), 10), true, nil
	}
	return nil, false, &codec.InputError{Class: codec.ClassMissingKey, Offset: off,
		Msg: fmt.Sprintf("field %q is %s, want a string, bytes, an integer or an enum", name, kindName(fd))}
}

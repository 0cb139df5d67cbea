package schema

import (
	"context"
	"encoding/binary"
	"errors"
	"strconv"
	"testing"

	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/test/hostile"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/encoding/protowire"
)

// Hostile schemas and values for the work limits (test/hostile): each is
// what an attacker who may register a schema, or write a value, would send.
const (
	nullArray   = hostile.NullArrayAvro
	linked      = hostile.LinkedAvro
	nestedProto = hostile.NodesProto
)

var (
	nullBlocks  = hostile.NullBlocks
	linkedValue = hostile.LinkedValue
	nodeValue   = hostile.NodeValue
)

func inspectClass(t *testing.T, f *Format, value []byte) codec.Inspection {
	t.Helper()
	in, err := f.Inspect(context.Background(), value)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// A 401-byte Avro value declaring a hundred million nulls, and a
// 10,000-deep recursive value, are dead-lettered with their classes (the
// benchmark BenchmarkHostile shows what each costs).
func TestAvroLimits(t *testing.T) {
	r := newRegistry(t)
	bomb := r.register(t, "bomb-value", sr.Schema{Schema: nullArray})
	deep := r.register(t, "linked-value", sr.Schema{Schema: linked})
	f := newFormat(t, r, codec.ValueAvro, nil)

	value := append(appendFrame(nil, bomb, nil), nullBlocks(401-headerLen)...)
	if len(value) != 401 {
		t.Fatalf("the bomb is %d bytes", len(value))
	}
	in := inspectClass(t, f, value)
	if in.Class() != codec.ClassTooManyElements || !errors.Is(in.Err(), codec.ErrTooManyElements) {
		t.Errorf("401-byte array of null: %v %v", in.Kind, in.Err())
	}
	// Within the limit it is a value like any other.
	small := append(appendFrame(nil, bomb, nil), binary.AppendVarint(nil, 1000)...)
	small = append(small, 0, 0)
	if in := inspectClass(t, f, small); in.Kind != codec.NeedsNumber {
		t.Errorf("1,000 nulls: %v %v", in.Kind, in.Err())
	}

	for _, tc := range []struct {
		levels int
		want   codec.Class
	}{{codec.DefaultMaxDepth, ""}, {codec.DefaultMaxDepth + 1, codec.ClassTooDeep}, {10000, codec.ClassTooDeep}} {
		value := append(appendFrame(nil, deep, nil), linkedValue(tc.levels)...)
		in := inspectClass(t, f, value)
		if in.Class() != tc.want || (tc.want == "" && in.Kind != codec.NeedsNumber) {
			t.Errorf("%d levels: %v %q %v, want class %q", tc.levels, in.Kind, in.Class(), in.Err(), tc.want)
		}
		// The key lookup walks with the same limits.
		if _, _, err := f.Field(context.Background(), value, "order_no"); codec.ClassOf(err) != tc.want {
			t.Errorf("%d levels: Field: %v, want class %q", tc.levels, err, tc.want)
		}
	}

	tight := newFormat(t, r, codec.ValueAvro, func(s *Settings) { s.MaxElements = 10; s.MaxDepth = 3 })
	if in := inspectClass(t, tight, append(appendFrame(nil, deep, nil), linkedValue(4)...)); in.Class() != codec.ClassTooDeep {
		t.Errorf("4 levels with MaxDepth 3: %v", in.Err())
	}
	// Every value counts: 11 nulls are 11 elements, with the two fields 13.
	v := append(appendFrame(nil, bomb, nil), binary.AppendVarint(nil, 8)...)
	if in := inspectClass(t, tight, append(v, 0, 0)); in.Kind != codec.NeedsNumber {
		t.Errorf("8 nulls and 2 fields with MaxElements 10: %v", in.Err())
	}
	v = append(appendFrame(nil, bomb, nil), binary.AppendVarint(nil, 9)...)
	if in := inspectClass(t, tight, append(v, 0, 0)); in.Class() != codec.ClassTooManyElements {
		t.Errorf("9 nulls and 2 fields with MaxElements 10: %v", in.Err())
	}
	// A block count of -2^63 (whose negation is itself) is corrupt.
	v = append(appendFrame(nil, bomb, nil), binary.AppendVarint(nil, -1<<63)...)
	if in := inspectClass(t, f, append(v, 0, 0, 0)); in.Class() != codec.ClassUndecodable {
		t.Errorf("block count MinInt64: %v", in.Err())
	}
}

func TestProtobufLimits(t *testing.T) {
	r := newRegistry(t)
	id := r.register(t, "nodes-value", sr.Schema{Schema: nestedProto, Type: sr.TypeProtobuf})
	f := newFormat(t, r, codec.ValueProtobuf, func(s *Settings) { s.MaxElements = 1000 })
	for _, tc := range []struct {
		levels int
		want   codec.Class
	}{{codec.DefaultMaxDepth, ""}, {codec.DefaultMaxDepth + 1, codec.ClassTooDeep}, {10000, codec.ClassTooDeep}} {
		in := inspectClass(t, f, append(appendFrame(nil, id, []int{0}), nodeValue(tc.levels)...))
		if in.Class() != tc.want || (tc.want == "" && in.Kind != codec.NeedsNumber) {
			t.Errorf("%d levels: %v %q %v, want class %q", tc.levels, in.Kind, in.Class(), in.Err(), tc.want)
		}
	}
	for _, tc := range []struct {
		items int
		want  codec.Class
	}{{1000, ""}, {1001, codec.ClassTooManyElements}} {
		// The packed field's tag counts as one element too, so it holds
		// one item fewer.
		var packed []byte
		for i := range tc.items - 1 {
			packed = protowire.AppendVarint(packed, uint64(i))
		}
		payload := protowire.AppendTag(nil, 3, protowire.BytesType)
		payload = protowire.AppendBytes(payload, packed)
		in := inspectClass(t, f, append(appendFrame(nil, id, []int{0}), payload...))
		if in.Class() != tc.want || (tc.want == "" && in.Kind != codec.NeedsNumber) {
			t.Errorf("%d packed items: %v %q %v, want class %q", tc.items, in.Kind, in.Class(), in.Err(), tc.want)
		}
	}
}

// Only schemas of the allowed subjects, or allowed IDs, are read; any
// other is schema_not_allowed without being fetched, and an ID the
// registry does not know is unknown_schema.
func TestAllowedSubjects(t *testing.T) {
	r := newRegistry(t)
	ok := r.register(t, "orders-value", sr.Schema{Schema: orderV1})
	other := r.register(t, "bomb-value", sr.Schema{Schema: nullArray})
	byID := r.register(t, "linked-value", sr.Schema{Schema: linked})
	f := newFormat(t, r, codec.ValueAvro, func(s *Settings) {
		s.AllowedSubjects = []string{"orders-value", strconv.Itoa(byID)}
	})
	if in := inspectClass(t, f, avroValue(t, ok, orderV1, v1Order("A"))); in.Kind != codec.NeedsNumber {
		t.Errorf("allowed subject: %v", in.Err())
	}
	if in := inspectClass(t, f, append(appendFrame(nil, byID, nil), linkedValue(2)...)); in.Kind != codec.NeedsNumber {
		t.Errorf("allowed id: %v", in.Err())
	}
	in := inspectClass(t, f, append(appendFrame(nil, other, nil), 0, 0))
	if in.Class() != codec.ClassSchemaNotAllowed || !errors.Is(in.Err(), codec.ErrSchemaNotAllowed) {
		t.Errorf("another subject: %v", in.Err())
	}
	if in := inspectClass(t, f, append(appendFrame(nil, 9999, nil), 0, 0)); in.Class() != codec.ClassUnknownSchema {
		t.Errorf("unknown id: %v", in.Err())
	}
	if _, err := New(Settings{Format: codec.ValueAvro, URL: r.URL(), AllowedSubjects: []string{" "}}); !errors.Is(err, codec.ErrInvalidConfig) {
		t.Errorf("an empty subject: %v", err)
	}
}

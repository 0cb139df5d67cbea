package schema

import (
	"bytes"
	"fmt"
	"slices"
	"testing"

	"github.com/flakestream/flakestream/codec"
	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/dynamicpb"
)

// FuzzWireHeader checks the Confluent header and Protobuf message-index
// readers on any bytes. Invariants:
//   - neither panics;
//   - an accepted header is magic byte 0 and the 4-byte ID, and writing the
//     ID back gives the same 5 bytes;
//   - accepted message indexes end inside the value, and writing the path
//     back and reading it again gives the same path.
func FuzzWireHeader(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 1, 0})
	f.Add([]byte{0, 0, 0, 0, 1, 4, 2, 6})
	f.Add([]byte{1, 2, 3})
	f.Add([]byte{0, 0x80, 0, 0, 0, 0x7f})
	f.Fuzz(func(t *testing.T, b []byte) {
		id, bad := schemaID(b)
		if bad != nil {
			if bad.Class != codec.ClassNotFramed {
				t.Fatalf("class %q", bad.Class)
			}
			return
		}
		if !bytes.Equal(appendFrame(nil, id, nil), b[:headerLen]) {
			t.Fatalf("id %d does not write back to %x", id, b[:headerLen])
		}
		path, off, bad := messageIndexes(b, headerLen)
		if bad != nil {
			return
		}
		if off > len(b) || len(path) == 0 {
			t.Fatalf("off %d of %d, path %v", off, len(b), path)
		}
		again, _, bad := messageIndexes(appendFrame(nil, id, path), headerLen)
		if bad != nil || !slices.Equal(again, path) {
			t.Fatalf("path %v reads back as %v (%v)", path, again, bad)
		}
	})
}

// FuzzAvro numbers arbitrary payloads under five writer schemas: a record
// without the number field (append), one with it (replace), a union of
// null and two records (one of each), and two hostile ones, an array of
// null and a recursive record. Invariants:
//   - Inspect never panics and never errors (the registry is up);
//   - a bad payload is ClassUndecodable, ClassInvalidNumber, ClassTooDeep or
//     ClassTooManyElements (or, for the union's null, ClassNoNumberField);
//   - with tighter limits, Inspect says the same or reaches a limit;
//   - the numbered value is at most 48 bytes longer;
//   - a payload Inspect accepts also decodes with hamba/avro;
//   - a numbered value decodes with the output schema its header names,
//     holds the number, keeps the payload's bytes (append: as a prefix), and
//     inspects again as HasNumber with that number.
func FuzzAvro(f *testing.F) {
	r := newRegistry(f)
	absent := r.register(f, "a-value", sr.Schema{Schema: orderV1})
	present := r.register(f, "b-value", sr.Schema{Schema: orderWithNo})
	union := r.register(f, "c-value", sr.Schema{Schema: unionSchema})
	bomb := r.register(f, "d-value", sr.Schema{Schema: nullArray})
	deep := r.register(f, "e-value", sr.Schema{Schema: linked})
	fm := newFormat(f, r, codec.ValueAvro, nil)
	tight := newFormat(f, r, codec.ValueAvro, func(s *Settings) { s.MaxDepth, s.MaxElements = 3, 16 })
	seed := func(text string, v any) {
		b, err := avro.Marshal(parseAvro(f, text), v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, int64(42))
	}
	seed(orderV1, v1Order("A"))
	seed(orderWithNo, map[string]any{"sku": "A", "order_no": nil, "qty": 1})
	seed(orderWithNo, map[string]any{"sku": "A", "order_no": "17", "qty": 1})
	f.Add([]byte{2, 2, 'A'}, int64(1))
	f.Add([]byte{4, 6, 0}, int64(1))
	f.Add(nullBlocks(40), int64(1))
	f.Add(linkedValue(5), int64(1))
	writers := map[int]string{absent: orderV1, present: orderWithNo, union: unionSchema, bomb: nullArray, deep: linked}
	f.Fuzz(func(t *testing.T, payload []byte, id int64) {
		if id < 0 {
			id = -(id + 1)
		}
		for sid, text := range writers {
			value := append(appendFrame(nil, sid, nil), payload...)
			insp, err := fm.Inspect(ctx, value)
			if err != nil {
				t.Fatal(err)
			}
			checkLimited(t, tight, value, insp)
			if insp.Kind == codec.Bad {
				if c := insp.Class(); c != codec.ClassUndecodable && c != codec.ClassInvalidNumber &&
					c != codec.ClassTooDeep && c != codec.ClassTooManyElements &&
					(sid != union || c != codec.ClassNoNumberField) {
					t.Fatalf("class %q: %v", c, insp.Err())
				}
				continue
			}
			var m any
			if err := avro.Unmarshal(parseAvro(t, text), payload, &m); err != nil || m == nil {
				t.Fatalf("accepted a payload hamba rejects: %v (decoded %v)", err, m)
			}
			if insp.Kind == codec.HasNumber {
				continue
			}
			out, err := fm.AppendNumbered(ctx, nil, value, insp, id)
			if err != nil {
				t.Fatal(err)
			}
			if len(out) > len(value)+48 {
				t.Fatalf("numbered value grew by %d bytes", len(out)-len(value))
			}
			if sid == absent && !bytes.Equal(out[headerLen:len(value)], payload) {
				t.Fatal("append changed the payload")
			}
			_, got := decodeOutput(t, fm, out)
			if fmt.Sprint(got["order_no"]) != itoa64(id) {
				t.Fatalf("order_no %v, want %d", got["order_no"], id)
			}
			again, err := fm.Inspect(ctx, out)
			if err != nil || again.Kind != codec.HasNumber || again.Number != id {
				t.Fatalf("numbered value inspects as %+v %v", again, err)
			}
		}
	})
}

// checkLimited checks value against a format with tighter limits than the
// one that gave insp: it must say the same, or that a limit is reached
// (which it may reach before an error further on).
func checkLimited(t *testing.T, tight *Format, value []byte, insp codec.Inspection) {
	t.Helper()
	got, err := tight.Inspect(ctx, value)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case got.Class() == codec.ClassTooDeep || got.Class() == codec.ClassTooManyElements:
		// Reached before anything the loose walk found further on.
	case got.Kind != insp.Kind || got.Class() != insp.Class() || got.Number != insp.Number:
		t.Fatalf("tight limits say %v %q (%v), loose ones %v %q (%v)", got.Kind, got.Class(), got.Err(), insp.Kind, insp.Class(), insp.Err())
	}
}

func itoa64(n int64) string { return string(appendInt64(nil, n)) }
func appendInt64(b []byte, n int64) []byte {
	if n >= 10 {
		b = appendInt64(b, n/10)
	}
	return append(b, byte('0'+n%10))
}

// FuzzProtobuf numbers arbitrary payloads as shop.Order (message index [1],
// a string order_no). Invariants:
//   - Inspect never panics and never errors;
//   - a bad payload is ClassUndecodable or ClassInvalidNumber;
//   - the payload is ClassUndecodable exactly when proto.Unmarshal rejects it;
//   - a numbered value is at most 48 bytes longer, keeps the input's bytes
//     as its prefix, unmarshals as
//     shop.Order with order_no the number, and inspects again as HasNumber.
func FuzzProtobuf(f *testing.F) {
	r, pid, fd := protoSetup(f)
	// Loose enough for anything proto.Unmarshal accepts (its own recursion
	// limit is 10,000), so the two can be compared.
	fm := newFormat(f, r, codec.ValueProtobuf, func(s *Settings) { s.MaxDepth, s.MaxElements = 10001, 1<<30 })
	tight := newFormat(f, r, codec.ValueProtobuf, func(s *Settings) { s.MaxDepth, s.MaxElements = 3, 16 })
	md := fd.Messages().ByName("Order")
	b, _ := proto.Marshal(orderMsg(fd, "Order"))
	f.Add(b, int64(7))
	f.Add([]byte{0x22, 0x02, '1', '2'}, int64(7))
	f.Fuzz(func(t *testing.T, payload []byte, id int64) {
		if id < 0 {
			id = -(id + 1)
		}
		value := append(appendFrame(nil, pid, []int{1}), payload...)
		insp, err := fm.Inspect(ctx, value)
		if err != nil {
			t.Fatal(err)
		}
		checkLimited(t, tight, value, insp)
		// The walker accepts exactly what proto.Unmarshal accepts.
		uerr := proto.Unmarshal(payload, dynamicpb.NewMessage(md))
		if (insp.Class() == codec.ClassUndecodable) != (uerr != nil) {
			t.Fatalf("walker says %v %q, proto.Unmarshal says %v", insp.Kind, insp.Class(), uerr)
		}
		switch insp.Kind {
		case codec.Bad:
			if c := insp.Class(); c != codec.ClassUndecodable && c != codec.ClassInvalidNumber {
				t.Fatalf("class %q: %v", c, insp.Err())
			}
			return
		case codec.HasNumber:
			return
		}
		out, err := fm.AppendNumbered(ctx, nil, value, insp, id)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out[headerLen:len(value)], value[headerLen:]) {
			t.Fatal("append changed the message")
		}
		if len(out) > len(value)+48 {
			t.Fatalf("numbered value grew by %d bytes", len(out)-len(value))
		}
		m := dynamicpb.NewMessage(md)
		if err := proto.Unmarshal(out[len(value)-len(payload):], m); err != nil {
			t.Fatal(err)
		}
		if got := m.Get(md.Fields().ByName("order_no")).String(); got != itoa64(id) {
			t.Fatalf("order_no %q, want %d", got, id)
		}
		again, err := fm.Inspect(ctx, out)
		if err != nil || again.Kind != codec.HasNumber || again.Number != id {
			t.Fatalf("numbered value inspects as %+v %v", again, err)
		}
	})
}

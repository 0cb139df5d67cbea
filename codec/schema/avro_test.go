package schema

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/flakestream/flakestream/codec"
	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"
)

var ctx = context.Background()

// number inspects value, expects NeedsNumber and numbers it with id.
func number(t testing.TB, f *Format, value []byte, id int64) []byte {
	t.Helper()
	insp, err := f.Inspect(ctx, value)
	if err != nil {
		t.Fatal(err)
	}
	if insp.Kind != codec.NeedsNumber {
		t.Fatalf("Inspect = %v %v, want needs_number", insp.Kind, insp.Err())
	}
	out, err := f.AppendNumbered(ctx, nil, value, insp, id)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestAvroSpliceAppendsTheField(t *testing.T) {
	for _, tc := range []struct {
		format codec.NumberFormat
		want   any
	}{
		{codec.FormatString, "229710323916801"},
		{codec.FormatNumber, int64(229710323916801)},
	} {
		t.Run(tc.format.String(), func(t *testing.T) {
			r := newRegistry(t)
			in := r.register(t, "orders-value", sr.Schema{Schema: orderV1})
			f := newFormat(t, r, codec.ValueAvro, func(s *Settings) { s.NumberFormat = tc.format })
			value := avroValue(t, in, orderV1, v1Order("A-1"))
			out := number(t, f, value, 229710323916801)

			// The payload is kept byte for byte; only the field is appended.
			if !bytes.Equal(out[headerLen:len(value)], value[headerLen:]) {
				t.Fatalf("payload changed:\n in %x\nout %x", value[headerLen:], out[headerLen:len(value)])
			}
			outID, m := decodeOutput(t, f, out)
			if outID == in {
				t.Fatalf("output id = input id %d, want the output schema's", in)
			}
			if m["order_no"] != tc.want || m["sku"] != "A-1" || m["qty"] != 2 {
				t.Fatalf("decoded output = %v, want order_no %v and the input's fields", m, tc.want)
			}
			// Registered under <output topic>-value.
			if ss, ok := r.GetSchema("orders-numbered-value", 1); !ok || ss.ID != outID {
				t.Fatalf("orders-numbered-value v1 = %+v %v, want id %d", ss, ok, outID)
			}
		})
	}
}

// srfake checks no compatibility, so this test does: the output schema must
// read everything the writer schema wrote (BACKWARD), for both number types.
func TestAvroOutputSchemaIsBackwardCompatible(t *testing.T) {
	check := avro.NewSchemaCompatibility()
	for _, writer := range []string{orderV1, orderV2, orderWithNo} {
		for _, asString := range []bool{true, false} {
			text, err := addField(writer, "order_no", asString)
			if err != nil {
				if writer == orderWithNo {
					continue
				}
				t.Fatal(err)
			}
			if writer == orderWithNo {
				// The field is present: the plan keeps the writer schema.
				text = writer
			}
			if err := check.Compatible(parseAvro(t, text), parseAvro(t, writer)); err != nil {
				t.Errorf("output schema cannot read the writer's data (string=%v): %v\n%s", asString, err, text)
			}
		}
	}
	// The checker can fail: a field added without a default is not BACKWARD.
	noDefault := `{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"sku","type":"string"},{"name":"order_no","type":"string"}]}`
	if err := check.Compatible(parseAvro(t, noDefault), parseAvro(t, `{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"sku","type":"string"}]}`)); err == nil {
		t.Fatal("the checker accepts a field without a default: this test would prove nothing")
	}
}

func TestAvroFieldPresentIsReplacedInPlace(t *testing.T) {
	r := newRegistry(t)
	in := r.register(t, "orders-value", sr.Schema{Schema: orderWithNo})
	f := newFormat(t, r, codec.ValueAvro, nil)

	value := avroValue(t, in, orderWithNo, map[string]any{"sku": "A-1", "order_no": nil, "qty": 3})
	out := number(t, f, value, 42)
	outID, m := decodeOutput(t, f, out)
	if m["order_no"] != "42" || m["sku"] != "A-1" || m["qty"] != 3 {
		t.Fatalf("decoded = %v", m)
	}
	if outID != in {
		t.Fatalf("output id %d, want the writer's %d (same schema)", outID, in)
	}

	// A valid existing number: passes through with it.
	has := avroValue(t, in, orderWithNo, map[string]any{"sku": "A-1", "order_no": "7", "qty": 3})
	insp, err := f.Inspect(ctx, has)
	if err != nil || insp.Kind != codec.HasNumber || insp.Number != 7 {
		t.Fatalf("Inspect = %+v %v, want has_number 7", insp, err)
	}
	// "" is the string default: no number yet.
	empty := avroValue(t, in, orderWithNo, map[string]any{"sku": "A-1", "order_no": "", "qty": 3})
	if _, m := decodeOutput(t, f, number(t, f, empty, 43)); m["order_no"] != "43" {
		t.Fatalf("decoded = %v", m)
	}

	// A nullable long written as a long whatever the number format says.
	inL := r.register(t, "orders-value", sr.Schema{Schema: orderWithLongNo})
	vl := avroValue(t, inL, orderWithLongNo, map[string]any{"sku": "B", "order_no": nil})
	if _, m := decodeOutput(t, f, number(t, f, vl, 44)); m["order_no"] != int64(44) {
		t.Fatalf("decoded = %#v", m)
	}
	neg := avroValue(t, inL, orderWithLongNo, map[string]any{"sku": "B", "order_no": int64(-5)})
	if insp, _ := f.Inspect(ctx, neg); insp.Class() != codec.ClassInvalidNumber {
		t.Fatalf("negative number: class %q, want invalid_number", insp.Class())
	}
}

func TestAvroInterleavedWriterVersionsEachGetTheirOutputSchema(t *testing.T) {
	r := newRegistry(t)
	id1 := r.register(t, "orders-value", sr.Schema{Schema: orderV1})
	id2 := r.register(t, "orders-value", sr.Schema{Schema: orderV2})
	f := newFormat(t, r, codec.ValueAvro, nil)

	v2 := v1Order("B")
	v2["channel"] = "WEB"
	outIDs := map[int]map[int]bool{}
	for i := range 20 {
		in, value := id1, avroValue(t, id1, orderV1, v1Order(fmt.Sprint("A", i)))
		if i%2 == 1 {
			in, value = id2, avroValue(t, id2, orderV2, v2)
		}
		out := number(t, f, value, int64(1000+i))
		outID, m := decodeOutput(t, f, out)
		if m["order_no"] != fmt.Sprint(1000+i) {
			t.Fatalf("record %d: order_no %v", i, m["order_no"])
		}
		if in == id2 && m["channel"] != "WEB" {
			t.Fatalf("v2 record lost its v2 field: %v", m)
		}
		if outIDs[in] == nil {
			outIDs[in] = map[int]bool{}
		}
		outIDs[in][outID] = true
	}
	if len(outIDs[id1]) != 1 || len(outIDs[id2]) != 1 {
		t.Fatalf("output ids per input id = %v, want exactly one each", outIDs)
	}
	var o1, o2 int
	for k := range outIDs[id1] {
		o1 = k
	}
	for k := range outIDs[id2] {
		o2 = k
	}
	if o1 == o2 {
		t.Fatalf("both versions map to output id %d", o1)
	}
	// Registered once each (two POSTs), and each output schema reads its
	// writer's data, and v2's output reads v1's output data (the subject's
	// versions stay BACKWARD compatible in rollout order).
	if n := r.posts.Load(); n != 2 {
		t.Fatalf("%d registrations, want 2", n)
	}
	s1, _ := f.Client().SchemaByID(ctx, o1)
	s2, _ := f.Client().SchemaByID(ctx, o2)
	check := avro.NewSchemaCompatibility()
	if err := check.Compatible(parseAvro(t, s2.Schema), parseAvro(t, s1.Schema)); err != nil {
		t.Fatalf("output v2 cannot read output v1: %v", err)
	}
}

func TestSchemasAreFetchedOncePerID(t *testing.T) {
	r := newRegistry(t)
	in := r.register(t, "orders-value", sr.Schema{Schema: orderV1})
	f := newFormat(t, r, codec.ValueAvro, nil)
	value := avroValue(t, in, orderV1, v1Order("A"))
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 50 {
				insp, err := f.Inspect(ctx, value)
				if err != nil || insp.Kind != codec.NeedsNumber {
					t.Errorf("Inspect = %v %v", insp.Kind, err)
					return
				}
				if _, err := f.AppendNumbered(ctx, nil, value, insp, 1); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if g, p := r.gets.Load(), r.posts.Load(); g != 1 || p != 1 {
		t.Fatalf("%d schema fetches and %d registrations for 800 records, want 1 and 1", g, p)
	}
}

func TestRegistryUnavailableIsRetryable(t *testing.T) {
	r := newRegistry(t)
	in := r.register(t, "orders-value", sr.Schema{Schema: orderV1})
	f := newFormat(t, r, codec.ValueAvro, nil)
	value := avroValue(t, in, orderV1, v1Order("A"))

	for _, code := range []int{500, 503} {
		r.fail.Store(int64(code))
		_, err := f.Inspect(ctx, value)
		var re *RegistryError
		if !errors.Is(err, codec.ErrUnavailable) || !errors.As(err, &re) || re.StatusCode != code {
			t.Fatalf("HTTP %d: err = %v, want a retryable *RegistryError", code, err)
		}
	}
	// Nothing was cached: once the registry answers, the record numbers.
	r.fail.Store(0)
	number(t, f, value, 1)

	// Refused credentials are not retryable: the configuration is wrong.
	r2 := newRegistry(t)
	r2.fail.Store(401)
	f2 := newFormat(t, r2, codec.ValueAvro, nil)
	_, err := f2.Inspect(ctx, value)
	if err == nil || errors.Is(err, codec.ErrUnavailable) {
		t.Fatalf("HTTP 401: err = %v, want a non-retryable error", err)
	}

	// Unreachable: the server is gone.
	r3 := newRegistry(t)
	f3 := newFormat(t, r3, codec.ValueAvro, nil)
	r3.Close()
	if _, err := f3.Inspect(ctx, value); !errors.Is(err, codec.ErrUnavailable) {
		t.Fatalf("unreachable: err = %v, want codec.ErrUnavailable", err)
	}
}

func TestIncompatibleOutputSchemaIsFatalAndNamesTheSubject(t *testing.T) {
	r := newRegistry(t)
	in := r.register(t, "orders-value", sr.Schema{Schema: orderV1})
	f := newFormat(t, r, codec.ValueAvro, nil)
	value := avroValue(t, in, orderV1, v1Order("A"))
	insp, err := f.Inspect(ctx, value)
	if err != nil {
		t.Fatal(err)
	}
	r.failPost.Store(409)
	_, err = f.AppendNumbered(ctx, nil, value, insp, 1)
	var ie *IncompatibleError
	if !errors.As(err, &ie) || ie.Subject != "orders-numbered-value" || errors.Is(err, codec.ErrUnavailable) {
		t.Fatalf("err = %v, want a fatal *IncompatibleError for orders-numbered-value", err)
	}
	if !bytes.Contains([]byte(err.Error()), []byte(`"orders-numbered-value"`)) || !bytes.Contains([]byte(err.Error()), []byte("injected by the test")) {
		t.Fatalf("message %q does not name the subject and the reason", err)
	}
}

func TestSubjectStrategies(t *testing.T) {
	for _, tc := range []struct {
		strategy SubjectStrategy
		subject  string
	}{
		{TopicName, "orders-numbered-value"},
		{RecordName, "shop.Order"},
		{TopicRecordName, "orders-numbered-shop.Order"},
	} {
		t.Run(tc.strategy.String(), func(t *testing.T) {
			r := newRegistry(t)
			in := r.register(t, "orders-value", sr.Schema{Schema: orderV1})
			f := newFormat(t, r, codec.ValueAvro, func(s *Settings) { s.Strategy = tc.strategy })
			number(t, f, avroValue(t, in, orderV1, v1Order("A")), 1)
			if !r.SubjectExists(tc.subject) {
				t.Fatalf("subject %q not registered", tc.subject)
			}
			got, err := ParseSubjectStrategy(tc.strategy.String())
			if err != nil || got != tc.strategy {
				t.Fatalf("ParseSubjectStrategy(%q) = %v %v", tc.strategy, got, err)
			}
		})
	}
	if _, err := ParseSubjectStrategy("nope"); !errors.Is(err, codec.ErrInvalidConfig) {
		t.Fatalf("ParseSubjectStrategy(nope) = %v", err)
	}
}

const unionSchema = `["null",
	{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"sku","type":"string"}]},
	{"type":"record","name":"Refund","namespace":"shop","fields":[{"name":"amount","type":"long"},{"name":"order_no","type":["null","long"],"default":null}]}]`

func TestAvroTopLevelUnionOfRecords(t *testing.T) {
	r := newRegistry(t)
	in := r.register(t, "orders-value", sr.Schema{Schema: unionSchema})
	f := newFormat(t, r, codec.ValueAvro, nil)
	frame := func(payload ...byte) []byte { return append(appendFrame(nil, in, nil), payload...) }

	// Branch 1, Order{sku:"A"}: the field is appended (splice).
	order := frame(2, 2, 'A')
	out := number(t, f, order, 7)
	if !bytes.Equal(out[headerLen:len(order)], order[headerLen:]) {
		t.Fatal("payload changed")
	}
	// Branch 2, Refund{amount:3, order_no:null}: the field is replaced.
	refund := frame(4, 6, 0)
	out2 := number(t, f, refund, 8)

	id, _ := schemaID(out)
	s, err := f.Client().SchemaByID(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	outSchema := parseAvro(t, s.Schema)
	if err := avro.NewSchemaCompatibility().Compatible(outSchema, parseAvro(t, unionSchema)); err != nil {
		t.Fatalf("output union cannot read the writer's data: %v", err)
	}
	// Decode with the output union: each branch holds its number.
	for _, tc := range []struct {
		value []byte
		want  string
	}{{out, `map[order_no:7 sku:A]`}, {out2, `map[amount:3 order_no:8]`}} {
		var v any
		if err := avro.Unmarshal(outSchema, tc.value[headerLen:], &v); err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(unwrapUnion(v)); got != tc.want {
			t.Fatalf("decoded %v, want %s", got, tc.want)
		}
	}
	// null has no record to number.
	if insp, _ := f.Inspect(ctx, frame(0)); insp.Class() != codec.ClassNoNumberField {
		t.Fatalf("null branch: %v %q", insp.Kind, insp.Class())
	}
	if insp, _ := f.Inspect(ctx, frame(6)); insp.Class() != codec.ClassUndecodable {
		t.Fatalf("branch 3 of 3: %v %q", insp.Kind, insp.Class())
	}
	// Not under the record strategies: a union has no name.
	f2 := newFormat(t, r, codec.ValueAvro, func(s *Settings) { s.Strategy = RecordName })
	if insp, _ := f2.Inspect(ctx, order); insp.Class() != codec.ClassNoNumberField {
		t.Fatalf("record strategy: %v %q", insp.Kind, insp.Class())
	}
}

// unwrapUnion returns the record of a decoded union value, whichever way the
// decoder wraps it ({"shop.Order": {...}} or the record itself).
func unwrapUnion(v any) any {
	if m, ok := v.(map[string]any); ok && len(m) == 1 {
		for k, inner := range m {
			if strings.Contains(k, ".") {
				return unwrapUnion(inner)
			}
		}
	}
	return v
}

func TestAvroReferencesAreResolvedThroughTheRegistry(t *testing.T) {
	const money = `{"type":"record","name":"Money","namespace":"shop","fields":[{"name":"units","type":"long"},{"name":"currency","type":"string"}]}`
	const order = `{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"sku","type":"string"},{"name":"total","type":"shop.Money"}]}`
	r := newRegistry(t)
	r.register(t, "shop.Money", sr.Schema{Schema: money})
	refs := []sr.SchemaReference{{Name: "shop.Money", Subject: "shop.Money", Version: 1}}
	in := r.register(t, "orders-value", sr.Schema{Schema: order, References: refs})
	f := newFormat(t, r, codec.ValueAvro, nil)

	cache := &avro.SchemaCache{}
	if _, err := avro.ParseWithCache(money, "", cache); err != nil {
		t.Fatal(err)
	}
	writer, err := avro.ParseWithCache(order, "", cache)
	if err != nil {
		t.Fatal(err)
	}
	payload, err := avro.Marshal(writer, map[string]any{"sku": "A", "total": map[string]any{"units": int64(318), "currency": "CNY"}})
	if err != nil {
		t.Fatal(err)
	}
	out := number(t, f, append(appendFrame(nil, in, nil), payload...), 5)

	id, _ := schemaID(out)
	ss, err := f.Client().SchemaByID(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(ss.References) != 1 || ss.References[0] != refs[0] {
		t.Fatalf("output schema references = %+v, want the writer's", ss.References)
	}
	outSchema, err := avro.ParseWithCache(ss.Schema, "", cache)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := avro.Unmarshal(outSchema, out[headerLen:], &m); err != nil {
		t.Fatal(err)
	}
	if m["order_no"] != "5" || fmt.Sprint(m["total"]) != "map[currency:CNY units:318]" {
		t.Fatalf("decoded %v", m)
	}
}

// An Avro int (an int field, a union's branch, an enum's symbol) written
// in more than 5 bytes is refused, as Avro's Java reader refuses it, even
// when its value is small: a payload the walker accepts must decode
// everywhere. The same values written canonically pass.
func TestAvroIntLongerThanFiveBytesIsUndecodable(t *testing.T) {
	r := newRegistry(t)
	f := newFormat(t, r, codec.ValueAvro, nil)
	withEnum := r.register(t, "e-value", sr.Schema{Schema: `{"type":"record","name":"E","fields":[
		{"name":"state","type":{"type":"enum","name":"S","symbols":["NEW","PAID"]}},
		{"name":"qty","type":"int"}]}`})
	union := r.register(t, "u-value", sr.Schema{Schema: unionSchema})
	long0 := []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x00} // 0 in 6 bytes
	for _, c := range []struct {
		name       string
		id         int
		good, long []byte
	}{
		{"enum symbol", withEnum, []byte{2, 4}, append(append([]byte{}, long0...), 4)},
		{"int field", withEnum, []byte{2, 4}, append([]byte{2}, long0...)},
		{"top-level union branch", union, []byte{2, 2, 'A'}, []byte{0x82, 0x80, 0x80, 0x80, 0x80, 0x00, 2, 'A'}},
		{"nested union branch", r.register(t, "l-value", sr.Schema{Schema: linked}), []byte{2, 2, '7', 0}, append([]byte{2, 2, '7'}, long0...)},
	} {
		t.Run(c.name, func(t *testing.T) {
			frame := func(p []byte) []byte { return append(appendFrame(nil, c.id, nil), p...) }
			if insp, err := f.Inspect(ctx, frame(c.good)); err != nil || insp.Kind == codec.Bad {
				t.Fatalf("canonical payload: %v %v", insp.Err(), err)
			}
			insp, err := f.Inspect(ctx, frame(c.long))
			if err != nil || insp.Class() != codec.ClassUndecodable {
				t.Fatalf("6-byte int: class %q (%v), want %q", insp.Class(), err, codec.ClassUndecodable)
			}
		})
	}
}

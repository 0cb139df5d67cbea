package schema

import (
	"testing"

	"github.com/flakestream/flakestream/codec"
	"github.com/hamba/avro/v2"
)

func TestDemoOrdersDecodeAndNumber(t *testing.T) {
	for _, vf := range []codec.ValueFormat{codec.ValueAvro, codec.ValueProtobuf} {
		t.Run(string(vf), func(t *testing.T) {
			r := newRegistry(t)
			f := newFormat(t, r, vf, nil)
			id, err := RegisterDemoSchema(ctx, f.Client(), vf, "orders-value")
			if err != nil {
				t.Fatal(err)
			}
			value := AppendDemoOrder(nil, vf, id, 7, 1636701167209)
			if vf == codec.ValueAvro {
				var m map[string]any
				if err := avro.Unmarshal(parseAvro(t, DemoAvroSchema), value[headerLen:], &m); err != nil {
					t.Fatal(err)
				}
				if m["customer_id"] != "c-90007" || m["qty"] != 3 {
					t.Fatalf("decoded %v", m)
				}
			}
			out := number(t, f, value, 99)
			if n, ok, err := f.Number(ctx, out); n != 99 || !ok || err != nil {
				t.Fatalf("Number = %d %v %v", n, ok, err)
			}
			if k, ok, err := f.Field(ctx, out, "customer_id"); string(k) != "c-90007" || !ok || err != nil {
				t.Fatalf("Field = %q %v %v", k, ok, err)
			}
			if allocs := testing.AllocsPerRun(100, func() { _ = AppendDemoOrder(value[:0], vf, id, 7, 1) }); allocs != 0 {
				t.Fatalf("AppendDemoOrder allocates %v times", allocs)
			}
		})
	}
	if _, err := RegisterDemoSchema(ctx, nil, codec.ValueJSON, "x"); err == nil {
		t.Fatal("a demo schema for json")
	}
}

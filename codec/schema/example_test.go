package schema_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/codec/schema"
	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"
)

func Example() {
	ctx := context.Background()
	reg := srfake.New() // an in-memory registry; in production, --schema-registry URL
	defer reg.Close()
	const writer = `{"type":"record","name":"Order","fields":[{"name":"sku","type":"string"}]}`
	id, _, _ := reg.RegisterSchema("orders-value", sr.Schema{Schema: writer})

	f, err := schema.New(schema.Settings{Format: codec.ValueAvro, URL: reg.URL(), OutputTopic: "orders-numbered"})
	if err != nil {
		panic(err)
	}
	payload, _ := avro.Marshal(avro.MustParse(writer), map[string]any{"sku": "A-1"})
	value := append([]byte{0, 0, 0, 0, byte(id)}, payload...) // magic byte, schema id, payload

	insp, err := f.Inspect(ctx, value)
	if err != nil {
		panic(err) // the registry is down (errors.Is codec.ErrUnavailable): retry the batch
	}
	out, err := f.AppendNumbered(ctx, nil, value, insp, 42)
	if err != nil {
		panic(err)
	}
	fmt.Printf("in:  % x\nout: % x\n", value, out)
	n, ok, _ := f.Number(ctx, out)
	fmt.Println("number:", n, ok)
	ss, _ := reg.GetSchema("orders-numbered-value", 1)
	fmt.Println("output schema", ss.ID, ss.Schema.Schema)

	bad, _ := f.Inspect(ctx, []byte(`{"sku":"A-1"}`))
	fmt.Println("dead letter:", bad.Class())
	// Output:
	// in:  00 00 00 00 01 06 41 2d 31
	// out: 00 00 00 00 02 06 41 2d 31 04 34 32
	// number: 42 true
	// output schema 2 {"fields":[{"name":"sku","type":"string"},{"default":"","doc":"order number, added by flakestream","name":"order_no","type":"string"}],"name":"Order","type":"record"}
	// dead letter: not_framed
}

func ExampleFormat_Field() {
	ctx := context.Background()
	reg := srfake.New()
	defer reg.Close()
	const writer = `{"type":"record","name":"Order","fields":[{"name":"request_id","type":"string"},{"name":"qty","type":"int"}]}`
	id, _, _ := reg.RegisterSchema("orders-value", sr.Schema{Schema: writer})
	f, _ := schema.New(schema.Settings{Format: codec.ValueAvro, URL: reg.URL(), OutputTopic: "orders-numbered"})
	payload, _ := avro.Marshal(avro.MustParse(writer), map[string]any{"request_id": "req-7", "qty": 3})
	value := append([]byte{0, 0, 0, 0, byte(id)}, payload...)

	key, ok, _ := f.Field(ctx, value, "request_id") // --idempotency-key field:request_id
	fmt.Printf("%s %v\n", key, ok)
	qty, _, _ := f.Field(ctx, value, "qty")
	fmt.Printf("%s\n", qty)
	// Output:
	// req-7 true
	// 3
}

func ExampleRegistryError() {
	reg := srfake.New()
	url := reg.URL()
	reg.Close() // the registry is gone
	f, _ := schema.New(schema.Settings{Format: codec.ValueAvro, URL: url, OutputTopic: "o"})
	_, err := f.Inspect(context.Background(), []byte{0, 0, 0, 0, 1})
	var re *schema.RegistryError
	fmt.Println(errors.Is(err, codec.ErrUnavailable), errors.As(err, &re) && re.Retryable())
	// Output:
	// true true
}

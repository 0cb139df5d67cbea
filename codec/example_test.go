package codec_test

import (
	"fmt"

	"github.com/flakestream/flakestream/codec"
)

func Example() {
	c, err := codec.New(codec.Config{}) // "order_no", written as a string
	if err != nil {
		panic(err)
	}
	var buf []byte // reused across records: no allocation once it is big enough
	for i, value := range []string{
		`{"sku":"A-1","qty":2}`,
		`{"sku":"A-2","order_no":null}`,
		`{"sku":"A-3","order_no":"7"}`,
		`{"sku":"A-4"`,
	} {
		insp := c.Inspect([]byte(value))
		switch insp.Kind {
		case codec.NeedsNumber:
			buf = c.AppendNumbered(buf[:0], []byte(value), insp, int64(100+i))
			fmt.Printf("numbered: %s\n", buf)
		case codec.HasNumber:
			fmt.Printf("has %d:   %s\n", insp.Number, value)
		case codec.Bad:
			fmt.Printf("dead letter %s: %v\n", insp.Class(), insp.Err())
		}
	}
	// Output:
	// numbered: {"sku":"A-1","qty":2,"order_no":"100"}
	// numbered: {"sku":"A-2","order_no":"101"}
	// has 7:   {"sku":"A-3","order_no":"7"}
	// dead letter not_json: codec: not_json at byte 12: unexpected end of input in object, want ',' or '}'
}

func ExampleCodec_AppendNumbered() {
	c, err := codec.New(codec.Config{Field: "id", Format: codec.FormatNumber})
	if err != nil {
		panic(err)
	}
	for _, value := range []string{
		"{ }",
		"{\n  \"a\": 1\n}\n",
		`{"id" : null, "b":[]}`,
	} {
		insp := c.Inspect([]byte(value))
		fmt.Printf("%q\n", c.AppendNumbered(nil, []byte(value), insp, 42))
	}
	// Output:
	// "{\"id\":42 }"
	// "{\n  \"a\": 1,\"id\":42\n}\n"
	// "{\"id\" : 42, \"b\":[]}"
}

func ExampleField() {
	value := []byte(`{"customer":{"order_key":"inner"},"order_key":"k-\u00e9-1","n":12}`)
	key, ok, err := codec.Field(value, "order_key")
	fmt.Printf("%s %v %v\n", key, ok, err)
	n, ok, err := codec.Field(value, "n")
	fmt.Printf("%s %v %v\n", n, ok, err)
	_, ok, err = codec.Field(value, "missing")
	fmt.Println(ok, err)
	// Output:
	// k-é-1 true <nil>
	// 12 true <nil>
	// false <nil>
}

func ExampleAuditRecord_AppendJSON() {
	// The number is from the default layout (41/5/5/12 bits, epoch
	// 2021-11-12T00:00:00+08:00), decoded by idgen.
	rec := codec.AuditRecord{
		Decoded: codec.Decoded{
			ID:        229710323916801,
			UnixMs:    1636701167209,
			ElapsedMs: 54767209,
			Server:    1,
			Worker:    2,
			Sequence:  1,
			Valid:     true,
		},
		Topic:        "orders-numbered",
		Partition:    3,
		Offset:       17,
		RecordUnixMs: 1636701167250,
		LagMs:        41,
		Source:       "orders/3/16",
		Anomalies:    []string{codec.AnomalyDuplicate},
	}
	fmt.Printf("%s\n", rec.AppendJSON(nil))
	fmt.Printf("%s\n", rec.Decoded.AppendJSON(nil))
	fmt.Printf("%s\n", codec.AuditRecord{Topic: "t", Source: "s/0/1"}.AppendJSON(nil))
	// Output:
	// {"id":"229710323916801","unix_ms":1636701167209,"time":"2021-11-12T07:12:47.209Z","elapsed_ms":54767209,"server":1,"worker":2,"sequence":1,"topic":"orders-numbered","partition":3,"offset":17,"record_unix_ms":1636701167250,"lag_ms":41,"source":"orders/3/16","anomalies":["duplicate"]}
	// {"id":"229710323916801","unix_ms":1636701167209,"time":"2021-11-12T07:12:47.209Z","elapsed_ms":54767209,"server":1,"worker":2,"sequence":1}
	// {"id":"","unix_ms":0,"time":"","elapsed_ms":0,"server":0,"worker":0,"sequence":0,"topic":"t","partition":0,"offset":0,"record_unix_ms":0,"lag_ms":0,"source":"s/0/1","anomalies":[]}
}

func ExampleParseSource() {
	src := codec.AppendSource(nil, "orders", 3, 1024)
	fmt.Printf("%s\n", src)
	topic, partition, offset, err := codec.ParseSource(string(src))
	fmt.Println(topic, partition, offset, err)
	_, _, _, err = codec.ParseSource("orders/3/-1")
	fmt.Println(err)
	// Output:
	// orders/3/1024
	// orders 3 1024 <nil>
	// codec: source "orders/3/-1": offset "-1" is not a non-negative int64: invalid source
}

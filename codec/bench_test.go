package codec

import "testing"

// Typical order events, about 200 bytes each, as the worker sees them.
const (
	orderEvent = `{"event":"order_created","customer_id":"c-90211","currency":"CNY",` +
		`"items":[{"sku":"SKU-1029","qty":2,"price":"59.90"},{"sku":"SKU-77","qty":1,"price":"199.00"}],` +
		`"total":"318.80","created_at":"2021-11-12T07:12:47.209Z","channel":"app"}`
	orderEventNull = `{"event":"order_created","order_no":null,"customer_id":"c-90211","currency":"CNY",` +
		`"items":[{"sku":"SKU-1029","qty":2,"price":"59.90"},{"sku":"SKU-77","qty":1,"price":"199.00"}],` +
		`"total":"318.80","created_at":"2021-11-12T07:12:47.209Z"}`
	orderEventEscaped = `{"event":"order_created","customer_id":"c-90211","note":"\"gift\" wrap\n\u00e9",` +
		`"items":[{"sku":"SKU-1029","qty":2,"price":"59.90"},{"sku":"SKU-77","qty":1,"price":"199.00"}],` +
		`"order\u005fno":null,"created_at":"2021-11-12T07:12:47.209Z","收件人":"张三"}`
	orderEventNumbered = `{"event":"order_created","customer_id":"c-90211","currency":"CNY",` +
		`"items":[{"sku":"SKU-1029","qty":2,"price":"59.90"},{"sku":"SKU-77","qty":1,"price":"199.00"}],` +
		`"total":"318.80","created_at":"2021-11-12T07:12:47.209Z","order_no":"229710323916801"}`
)

func sampleAuditRecord() AuditRecord {
	return AuditRecord{
		Decoded: Decoded{ID: 229710323916801, UnixMs: 1636701167209, ElapsedMs: 54767209,
			Server: 1, Worker: 2, Sequence: 1, Valid: true},
		Topic: "orders-numbered", Partition: 3, Offset: 1234567, RecordUnixMs: 1636701167250,
		LagMs: 41, Source: "orders/3/1234560", Anomalies: []string{AnomalyDuplicate},
	}
}

func BenchmarkInspectSplice(b *testing.B) {
	for _, bc := range []struct {
		name   string
		format NumberFormat
		value  string
	}{
		{"string/absent", FormatString, orderEvent},
		{"number/absent", FormatNumber, orderEvent},
		{"string/null", FormatString, orderEventNull},
		{"number/null", FormatNumber, orderEventNull},
		{"string/escaped", FormatString, orderEventEscaped},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c := mustNew(b, Config{Format: bc.format})
			value := []byte(bc.value)
			dst := make([]byte, 0, 1024)
			b.SetBytes(int64(len(value)))
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				insp := c.Inspect(value)
				if insp.Kind != NeedsNumber {
					b.Fatalf("Inspect = %v", insp.Kind)
				}
				dst = c.AppendNumbered(dst[:0], value, insp, 229710323916801+int64(i))
			}
		})
	}
}

func BenchmarkInspect(b *testing.B) {
	c := mustNew(b, Config{})
	value := []byte(orderEventNumbered)
	b.SetBytes(int64(len(value)))
	b.ReportAllocs()
	for b.Loop() {
		if insp := c.Inspect(value); insp.Kind != HasNumber {
			b.Fatalf("Inspect = %v", insp.Kind)
		}
	}
}

func BenchmarkField(b *testing.B) {
	value := []byte(orderEvent)
	b.SetBytes(int64(len(value)))
	b.ReportAllocs()
	for b.Loop() {
		if _, ok, err := Field(value, "customer_id"); !ok || err != nil {
			b.Fatalf("Field = %v, %v", ok, err)
		}
	}
}

func BenchmarkAuditRecordAppendJSON(b *testing.B) {
	rec := sampleAuditRecord()
	dst := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		dst = rec.AppendJSON(dst[:0])
	}
	b.SetBytes(int64(len(dst)))
}

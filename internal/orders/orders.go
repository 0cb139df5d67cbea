// Package orders makes order events for the demo, the benchmarks and the
// tests: clean ones, ones that already carry a number, and malformed ones of
// every dead-letter class.
package orders

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Kind of event.
type Kind int

// Kinds. Bad kinds follow the codec's dead-letter classes.
const (
	Clean        Kind = iota // needs a number
	Numbered                 // already carries a valid number
	NotJSON                  // not_json
	NotObject                // not_object
	InvalidUTF8              // invalid_utf8
	InvalidNum               // invalid_number
	DuplicateNum             // duplicate_field
	TooLarge                 // too_large (with a size limit below 64 KiB)
)

// BadKinds are the malformed kinds, in the order Mix cycles through them.
var BadKinds = []Kind{NotJSON, NotObject, InvalidUTF8, InvalidNum, DuplicateNum, TooLarge}

// Class returns the dead-letter class a bad kind lands in, or "".
func (k Kind) Class() string {
	return [...]string{"", "", "not_json", "not_object", "invalid_utf8", "invalid_number", "duplicate_field", "too_large"}[k]
}

// Event returns order i of the given kind, about size bytes long for clean
// events (at least ~150). numbered is the number a Numbered event carries.
func Event(i int, k Kind, size int, numbered int64) []byte {
	switch k {
	case NotJSON:
		return []byte(fmt.Sprintf(`{"order_ref":"ORD-%08d", amount: 12.50`, i))
	case NotObject:
		return []byte(fmt.Sprintf(`["ORD-%08d", 12.50]`, i))
	case InvalidUTF8:
		return []byte(fmt.Sprintf("{\"order_ref\":\"ORD-%08d\",\"note\":\"caf\xe9\"}", i))
	case InvalidNum:
		return []byte(fmt.Sprintf(`{"order_ref":"ORD-%08d","order_no":"12ab"}`, i))
	case DuplicateNum:
		return []byte(fmt.Sprintf(`{"order_ref":"ORD-%08d","order_no":"1","order_no":"2"}`, i))
	case TooLarge:
		return []byte(fmt.Sprintf(`{"order_ref":"ORD-%08d","blob":"%s"}`, i, strings.Repeat("x", 70000)))
	}
	var b strings.Builder
	fmt.Fprintf(&b, `{"order_ref":"ORD-%08d","customer":"C-%05d","currency":"EUR","amount":"%d.%02d",`, i, i%99991, 5+i%500, i%100)
	if k == Numbered {
		fmt.Fprintf(&b, `"order_no":"%d",`, numbered)
	}
	b.WriteString(`"items":[`)
	for j := 0; b.Len() < size-60 || j == 0; j++ {
		if j > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"sku":"SKU-%04d","qty":%d}`, (i+j*7)%9973, 1+j%3)
	}
	b.WriteString(`],"created_at":"` + time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC).Add(time.Duration(i)*time.Millisecond).Format(time.RFC3339Nano) + `"}`)
	return []byte(b.String())
}

// Mix says how many events in a thousand are bad and already numbered.
type Mix struct {
	BadPerMille      int
	NumberedPerMille int
}

// KindOf returns the kind of event i under the mix, spreading bad and
// numbered events evenly and cycling through every bad kind.
func (m Mix) KindOf(i int) Kind {
	r := i % 1000
	switch {
	case r < m.BadPerMille:
		return BadKinds[(i/1000+r)%len(BadKinds)]
	case r < m.BadPerMille+m.NumberedPerMille:
		return Numbered
	}
	return Clean
}

// Records returns n records for topic spread round robin over partitions,
// keyed by order reference, with a header and a fixed timestamp per record.
// Numbered events carry numberedBase+i.
func Records(topic string, partitions int32, n int, mix Mix, size int, numberedBase int64) []*kgo.Record {
	recs := make([]*kgo.Record, n)
	base := time.Now().Truncate(time.Millisecond)
	for i := range recs {
		k := mix.KindOf(i)
		recs[i] = &kgo.Record{
			Topic:     topic,
			Partition: int32(i) % partitions,
			Key:       []byte("ORD-" + strconv.Itoa(i)),
			Value:     Event(i, k, size, numberedBase+int64(i)),
			Headers:   []kgo.RecordHeader{{Key: "source-system", Value: []byte("shop-eu")}},
			Timestamp: base.Add(time.Duration(i) * time.Microsecond).Truncate(time.Millisecond),
		}
	}
	return recs
}

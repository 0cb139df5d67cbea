package pipeline

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flakestream/flakestream/test/testenv"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// sized returns build(n) for the n at which batchBytes is target, starting
// from the estimate n0, or fails t if no n gives exactly target (a varint
// that grows by a byte can skip a size).
func sized(t testing.TB, target, n0 int, build func(n int) *kgo.Record) *kgo.Record {
	t.Helper()
	n := max(n0, 0)
	for range 64 {
		r := build(n)
		got := batchBytes(r)
		if got == target {
			return r
		}
		n += target - got
		if n < 0 {
			break
		}
	}
	t.Fatalf("no record of exactly %d batch bytes near a padding of %d", target, n0)
	return nil
}

// setTopicConfig sets topic's configuration key to value.
func setTopicConfig(t testing.TB, adm *kadm.Client, topic, key, value string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: key, Value: &value}}, topic)
	if err == nil {
		_, err = rs.On(topic, nil)
	}
	if err != nil {
		t.Fatalf("set %s=%s on %s: %v", key, value, topic, err)
	}
}

// produceOne produces r with a new client (so that franz-go does not know
// the produce version yet and counts the largest batch overhead), which
// caps record batches at limit bytes and does not compress.
func produceOne(t *testing.T, k *testenv.KafkaCluster, limit int32, r *kgo.Record) error {
	t.Helper()
	cl := k.Client(t, kgo.ProducerBatchMaxBytes(limit), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordRetries(2))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return cl.ProduceSync(ctx, r).FirstErr()
}

// batchBytes is exactly the size at which franz-go refuses a record by
// itself, and a broker takes every record batchBytes allows, for records
// of every shape: keys, headers and values around the lengths where a
// varint grows a byte.
func TestBatchBytesIsTheProducersAndBrokersLimit(t *testing.T) {
	k := testenv.Kafka(t)
	adm := k.Admin(t)
	topic := k.NewTopic(t, 1)
	const limit = 20_000
	setTopicConfig(t, adm, topic, "max.message.bytes", strconv.Itoa(limit))
	shapes := []struct {
		name    string
		key     int
		headers []kgo.RecordHeader
	}{
		{"bare", 0, nil},
		{"key 63", 63, nil},
		{"key 64", 64, []kgo.RecordHeader{{Key: "h", Value: make([]byte, 63)}}},
		{"headers", 300, []kgo.RecordHeader{{Key: "a", Value: make([]byte, 64)}, {Key: strings.Repeat("b", 70), Value: nil}, {Key: "c", Value: make([]byte, 8192)}}},
	}
	for _, sh := range shapes {
		build := func(n int) *kgo.Record {
			return &kgo.Record{Topic: topic, Key: make([]byte, sh.key), Value: make([]byte, n), Headers: sh.headers}
		}
		t.Run(sh.name, func(t *testing.T) {
			at := sized(t, limit, limit-200, build)
			if err := produceOne(t, k, limit, at); err != nil {
				t.Fatalf("a record of exactly %d batch bytes under a producer limit of %d: %v", limit, limit, err)
			}
			over := sized(t, limit+1, limit-200, build)
			if err := produceOne(t, k, limit, over); !errors.Is(err, kerr.MessageTooLarge) {
				t.Fatalf("a record of %d batch bytes under a producer limit of %d: %v, want MESSAGE_TOO_LARGE from the producer", limit+1, limit, err)
			}
			// The broker counts the batch without the produce request's
			// 4 bytes: batchBytes errs on the safe side by those.
			brokerAt := sized(t, limit+4, limit-200, build)
			if err := produceOne(t, k, 2*limit, brokerAt); err != nil {
				t.Fatalf("a record of %d batch bytes to a topic of max.message.bytes %d: %v", limit+4, limit, err)
			}
			brokerOver := sized(t, limit+5, limit-200, build)
			if err := produceOne(t, k, 2*limit, brokerOver); !errors.Is(err, kerr.MessageTooLarge) {
				t.Fatalf("a record of %d batch bytes to a topic of max.message.bytes %d: %v, want MESSAGE_TOO_LARGE from the broker", limit+5, limit, err)
			}
		})
	}
}

// TestVarintLen holds varintLen to the encoder's length around every
// boundary of a byte, negative numbers included.
func TestVarintLen(t *testing.T) {
	for _, n := range []int{0, 1, -1, 63, 64, -64, -65, 8191, 8192, 1 << 20, -(1 << 20), 1<<31 - 1, -1 << 31, math.MaxInt64, math.MinInt64} {
		for _, m := range []int{n - 1, n, n + 1} {
			if got, want := varintLen(m), len(binary.AppendVarint(nil, int64(m))); got != want {
				t.Errorf("varintLen(%d) = %d, want %d", m, got, want)
			}
		}
	}
}

// batchBytesAtMost is never under batchBytes, for records of every shape
// around the lengths where a varint grows a byte, so a record it lets
// through without the exact count always fits.
func TestBatchBytesAtMostIsAnUpperBound(t *testing.T) {
	lengths := []int{0, 1, 63, 64, 65, 127, 128, 8191, 8192, 8193, 1<<20 - 1, 1 << 20, 1<<21 + 3}
	for _, k := range lengths {
		for _, v := range lengths {
			for headers := range 4 {
				r := &kgo.Record{Key: make([]byte, k), Value: make([]byte, v)}
				for h := range headers {
					r.Headers = append(r.Headers, kgo.RecordHeader{Key: strings.Repeat("h", lengths[(h+k)%len(lengths)]%200), Value: make([]byte, lengths[(h+v)%len(lengths)])})
				}
				if at, exact := batchBytesAtMost(r), batchBytes(r); at < exact {
					t.Fatalf("key %d, value %d, %d headers: bound %d under the exact %d", k, v, headers, at, exact)
				}
			}
		}
	}
}

package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/bits"
	"strconv"
	"sync/atomic"

	"github.com/flakestream/flakestream/eos"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Record-size limits. A record that does not fit where it goes is never
// produced: a too-large output record goes to the DLQ (class
// output_too_large), a too-large dead letter becomes a reference record.
// The limits are learnt at the start of every session, before anything is
// produced, because a record the producer or a broker refuses inside a
// transaction aborts the whole transaction.
const (
	// DefaultProduceBytes is the limit assumed for a topic whose
	// max.message.bytes cannot be read (no DESCRIBE_CONFIGS on it, nor on
	// the cluster) and no --max-produce-bytes was given: franz-go's and
	// Kafka's producer default, below the broker's default
	// message.max.bytes (1,048,588).
	DefaultProduceBytes = 1_000_012
	// ProduceBytesCap is the most any record batch may hold: below
	// franz-go's bound on one produce request (100 MiB) with room for
	// the request's own header.
	ProduceBytesCap = 100<<20 - 64<<10
	// MinDLQBytes is the least a dead-letter topic must take: a
	// reference record (at most 1 KiB of JSON, a key of at most
	// refKeyBytes and the worker's headers) must always fit.
	MinDLQBytes = 4 << 10
)

// batchOverhead is what a record batch costs besides its records, as
// franz-go counts it against ProducerBatchMaxBytes: the batch header (61
// bytes, which is all a broker counts against max.message.bytes) and the
// 4-byte length of the records field of the produce request. Checking
// against this, the larger of the two, satisfies both.
const batchOverhead = 61 + 4

// batchBytes is the size of a record batch that holds r alone, as franz-go
// checks it before buffering r (and a broker after it): the batch overhead
// and the record with its varint length prefix. The record is the first of
// its batch, so its timestamp and offset deltas are 0 (one byte each).
// Compression never makes franz-go send a batch larger than this.
func batchBytes(r *kgo.Record) int {
	l := 1 + 1 + 1 + // attributes, timestamp delta, offset delta
		varintLen(len(r.Key)) + len(r.Key) +
		varintLen(len(r.Value)) + len(r.Value) +
		varintLen(len(r.Headers))
	for _, h := range r.Headers {
		l += varintLen(len(h.Key)) + len(h.Key) + varintLen(len(h.Value)) + len(h.Value)
	}
	return batchOverhead + varintLen(l) + l
}

// batchBytesAtMost is a bound of batchBytes(r) from above, without the
// varints' lengths: each is taken at its most (five bytes for a length,
// which a record's lengths never pass). A record under its limit by this
// bound, every record of an order stream, needs no exact count.
func batchBytesAtMost(r *kgo.Record) int {
	l := batchOverhead + 5 + 3 + 5 + len(r.Key) + 5 + len(r.Value) + 5
	for _, h := range r.Headers {
		l += 10 + len(h.Key) + len(h.Value)
	}
	return l
}

// varintLen is the length of n as a Kafka (zigzag) varint: seven bits a
// byte. It is computed, not encoded, since every output record asks it a
// dozen times.
func varintLen(n int) int {
	u := uint64(n)<<1 ^ uint64(n>>63) // zigzag
	return (bits.Len64(u|1) + 6) / 7
}

// limits are the record-batch limits of the topics the worker produces
// to. The producer reads them through ProducerBatchMaxBytesFn when it
// first meets a partition, which is after Start has learnt them, and the
// batch checks each record against them before producing it.
type limits struct {
	flag    int32                            // --max-produce-bytes, 0: derived from the topics
	byTopic atomic.Pointer[map[string]int32] // learnt in Start, read by the producer
}

// fallback is the limit of a topic whose limit is unknown.
func (l *limits) fallback() int32 {
	if l.flag > 0 {
		return min(l.flag, ProduceBytesCap)
	}
	return DefaultProduceBytes
}

// of returns topic's limit (kgo.ProducerBatchMaxBytesFn).
func (l *limits) of(topic string) int32 {
	if m := l.byTopic.Load(); m != nil {
		if n, ok := (*m)[topic]; ok {
			return n
		}
	}
	return l.fallback()
}

// learn finds the limit of each topic: its max.message.bytes (which a
// topic inherits from the brokers' message.max.bytes unless set), read
// with DESCRIBE_CONFIGS on the topic; failing that, the brokers'
// message.max.bytes (which needs DESCRIBE_CONFIGS on the cluster); failing
// that, --max-produce-bytes or DefaultProduceBytes, which it logs once. A
// --max-produce-bytes below the topic's lowers it. A dead-letter topic
// that cannot take even a reference record is a fatal error.
func (l *limits) learn(ctx context.Context, adm *kadm.Client, log *slog.Logger, output, dlq string) error {
	learnt, why := topicLimits(ctx, adm, output, dlq)
	var missing []string
	for _, t := range []string{output, dlq} {
		if _, ok := learnt[t]; !ok {
			missing = append(missing, t)
		}
	}
	if len(missing) > 0 {
		n, err := brokerLimit(ctx, adm)
		if err == nil {
			for _, t := range missing {
				learnt[t] = n
			}
			log.Info("record-size limit: topics' max.message.bytes not readable; using the brokers' message.max.bytes",
				"topics", missing, "message_max_bytes", n, "reason", why)
		} else {
			for _, t := range missing {
				learnt[t] = l.fallback()
			}
			log.Warn("record-size limit: cannot read the topics' max.message.bytes nor the brokers' message.max.bytes (grant DESCRIBE_CONFIGS on the topics); using --max-produce-bytes, or its default if not given",
				"topics", missing, "limit", l.fallback(), "reason", why, "broker_reason", err)
		}
	}
	for t, n := range learnt {
		if l.flag > 0 {
			n = min(n, l.flag)
		}
		learnt[t] = max(min(n, ProduceBytesCap), 512) // franz-go's range
	}
	if n := learnt[dlq]; n < MinDLQBytes {
		return fmt.Errorf("%w: dead-letter topic %s takes record batches of at most %d bytes (max.message.bytes or --max-produce-bytes): too small for a reference record, want at least %d", eos.ErrFatal, dlq, n, MinDLQBytes)
	}
	l.byTopic.Store(&learnt)
	log.Info("record-size limits", "output", output, "output_max_bytes", learnt[output], "dlq", dlq, "dlq_max_bytes", learnt[dlq])
	return nil
}

// topicLimits reads max.message.bytes of topics; why says why some are
// missing.
func topicLimits(ctx context.Context, adm *kadm.Client, topics ...string) (map[string]int32, error) {
	out := map[string]int32{}
	rcs, err := adm.DescribeTopicConfigs(ctx, topics...)
	if err != nil {
		return out, err
	}
	var errs []error
	for _, rc := range rcs {
		if rc.Err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", rc.Name, rc.Err))
			continue
		}
		n, err := configInt(rc, "max.message.bytes")
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out[rc.Name] = n
	}
	return out, errors.Join(errs...)
}

// brokerLimit reads message.max.bytes of one broker.
func brokerLimit(ctx context.Context, adm *kadm.Client) (int32, error) {
	brokers, err := adm.ListBrokers(ctx)
	if err != nil {
		return 0, err
	}
	if len(brokers) == 0 {
		return 0, errors.New("no brokers in the metadata")
	}
	rcs, err := adm.DescribeBrokerConfigs(ctx, brokers[0].NodeID)
	if err != nil {
		return 0, err
	}
	if len(rcs) == 0 {
		return 0, errors.New("no broker configuration in the answer")
	}
	if rcs[0].Err != nil {
		return 0, rcs[0].Err
	}
	return configInt(rcs[0], "message.max.bytes")
}

// configInt reads config key of rc as a positive int32.
func configInt(rc kadm.ResourceConfig, key string) (int32, error) {
	for _, c := range rc.Configs {
		if c.Key != key || c.Value == nil {
			continue
		}
		n, err := strconv.ParseInt(*c.Value, 10, 32)
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("%s: %s %q is not a positive int32", rc.Name, key, *c.Value)
		}
		return int32(n), nil
	}
	return 0, fmt.Errorf("%s: no %s in its configuration", rc.Name, key)
}

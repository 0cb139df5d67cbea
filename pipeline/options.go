package pipeline

import (
	"time"

	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/eos"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Opt configures a Worker.
type Opt func(*cfg)

// OutputTopic sets the topic numbered events go to. Required.
func OutputTopic(t string) Opt { return func(c *cfg) { c.output = t } }

// DLQTopic sets the dead-letter topic, overriding the default
// "<first input topic>.dlq".
func DLQTopic(t string) Opt { return func(c *cfg) { c.dlq = t } }

// Numbers sets where numbers come from. Required (ErrNoNumberer).
func Numbers(n Numberer) Opt { return func(c *cfg) { c.numberer = n } }

// Codec sets the order-event codec, overriding codec.New(codec.Config{}).
func Codec(cd *codec.Codec) Opt { return func(c *cfg) { c.codec = cd } }

// Format sets the value format, overriding JSON through the Codec: a
// *schema.Format numbers Avro or Protobuf through a schema registry. Its
// errors follow codec.Format: one wrapping codec.ErrUnavailable aborts and
// retries the batch, any other ends Run (wrapping eos.ErrFatal).
func Format(f codec.Format) Opt { return func(c *cfg) { c.format = f } }

// Start sets where a group with no committed offsets starts, overriding the
// default StartEarliest (so that no order is skipped).
func Start(s StartOffset) Opt {
	return func(c *cfg) { c.start = s }
}

// MaxBufferedRecords bounds the records buffered for producing, overriding
// the default 100,000.
func MaxBufferedRecords(n int) Opt { return func(c *cfg) { c.maxBuffered = n } }

// FetchMaxBytes bounds one fetch response, overriding the default 32 MiB.
// Both bounds are the process's: its lanes share them (see Lanes).
func FetchMaxBytes(n int32) Opt { return func(c *cfg) { c.fetchMaxBytes = n } }

// MaxProduceBytes caps the record batches the worker produces, overriding
// the default 0: each topic's own limit (its max.message.bytes), learnt at
// the start of every session. Where that cannot be read (no
// DESCRIBE_CONFIGS), it is the limit; without it, DefaultProduceBytes is.
// A record whose output would be larger goes to the DLQ (class
// output_too_large); a dead letter that would be larger becomes a
// reference record (see codec.Reference).
func MaxProduceBytes(n int32) Opt { return func(c *cfg) { c.maxProduceBytes = n } }

// Linger sets the producer linger, overriding the default 0 (each
// transaction flushes at its end anyway).
func Linger(d time.Duration) Opt { return func(c *cfg) { c.linger = d } }

// TopUpWait bounds one more poll after a poll that returned fewer than
// MaxPollRecords records, whose records join the same transaction,
// overriding the default DefaultTopUpWait; 0 turns it off. At a low input
// rate it commits what arrived during the last transaction one
// transaction sooner (see docs/latency.md).
func TopUpWait(d time.Duration) Opt { return func(c *cfg) { c.eos.TopUpWait = eos.NoWait(d) } }

// StaticMembership makes the instance ID the group instance ID (KIP-345):
// an instance that restarts under the same ID takes its partitions back at
// once, without a rebalance. A member that stops for good is only removed
// after the session timeout, so use it where instances come back under
// their names (a StatefulSet), not where they are scaled away.
func StaticMembership() Opt { return func(c *cfg) { c.eos.Static = true } }

// Prefetch keeps up to ahead numbers reserved in the background, none older
// than maxAge, overriding the default of twice MaxPollRecords and 1s. A batch
// then takes its numbers without waiting for Redis. 0 turns it off: each
// batch reserves its own numbers.
func Prefetch(ahead int, maxAge time.Duration) Opt {
	return func(c *cfg) { c.prefetch, c.prefetchAge = ahead, maxAge }
}

// Parallelism sets how many goroutines number one batch, each taking whole
// input partitions, overriding the default GOMAXPROCS. 1 numbers a batch on
// the polling goroutine.
func Parallelism(n int) Opt { return func(c *cfg) { c.parallelism = n } }

// WithIdempotency gives records with the same idempotency key the same
// number; see Idempotency.
func WithIdempotency(i *Idempotency) Opt { return func(c *cfg) { c.idem = i } }

// CreateTopics makes the worker create a missing output or DLQ topic with
// as many partitions as the first input topic, instead of refusing to start.
func CreateTopics() Opt { return func(c *cfg) { c.createTopics = true } }

// Bounded makes the run a bounded one, for replays: records of a partition
// at or after its offset in stop are consumed but neither numbered nor
// produced, and after every committed transaction done is called with the
// group's committed offsets; true ends Run without error. Transaction
// markers are always read (and never numbered), so a bound on a marker is
// reached. See eos.Bound.
func Bounded(stop map[string]map[int32]int64, done func(committed map[string]map[int32]kgo.EpochOffset) bool) Opt {
	return func(c *cfg) { c.eos.Bound = &eos.Bound{Stop: stop, Done: done} }
}

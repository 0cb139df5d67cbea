package pipeline

import (
	"context"
	"log/slog"
	"time"

	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/internal/eos"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Opt configures a Worker.
type Opt func(*cfg)

// Brokers sets the seed brokers. Required.
func Brokers(addrs ...string) Opt { return func(c *cfg) { c.eos.Brokers = addrs } }

// InputTopics sets the topics of unnumbered order events. Required.
func InputTopics(topics ...string) Opt { return func(c *cfg) { c.eos.Topics = topics } }

// OutputTopic sets the topic numbered events go to. Required.
func OutputTopic(t string) Opt { return func(c *cfg) { c.output = t } }

// DLQTopic sets the dead-letter topic, overriding the default
// "<first input topic>.dlq".
func DLQTopic(t string) Opt { return func(c *cfg) { c.dlq = t } }

// Group sets the consumer group. Required.
func Group(g string) Opt { return func(c *cfg) { c.eos.Group = g } }

// InstanceID names this instance, overriding the default host name (unique
// per pod in Kubernetes). The transactional ID is derived from it, so a
// restarted instance fences its predecessor's open transaction at once
// instead of leaving read_committed readers stalled until it times out.
func InstanceID(id string) Opt { return func(c *cfg) { c.eos.InstanceID = id } }

// TransactionalID sets the transactional ID outright, overriding the default
// "flakestream-<group>-<instance id>".
func TransactionalID(id string) Opt { return func(c *cfg) { c.eos.TransactionalID = id } }

// Numbers sets where numbers come from. Required (ErrNoNumberer).
func Numbers(n Numberer) Opt { return func(c *cfg) { c.numberer = n } }

// Codec sets the order-event codec, overriding codec.New(codec.Config{}).
func Codec(cd *codec.Codec) Opt { return func(c *cfg) { c.codec = cd } }

// Format sets the value format, overriding JSON through the Codec: a
// *schema.Format numbers Avro or Protobuf through a schema registry. Its
// errors follow codec.Format: one wrapping codec.ErrUnavailable aborts and
// retries the batch, any other ends Run (wrapping ErrFatal).
func Format(f codec.Format) Opt { return func(c *cfg) { c.format = f } }

// Start sets where a group with no committed offsets starts, overriding the
// default StartEarliest (so that no order is skipped).
func Start(s StartOffset) Opt {
	return func(c *cfg) { c.start = s }
}

// MaxPollRecords bounds the records of one transaction, overriding the
// default 10,000.
func MaxPollRecords(n int) Opt { return func(c *cfg) { c.eos.MaxPollRecords = n } }

// MaxBufferedRecords bounds the records buffered for producing, overriding
// the default 100,000.
func MaxBufferedRecords(n int) Opt { return func(c *cfg) { c.maxBuffered = n } }

// FetchMaxBytes bounds one fetch response, overriding the default 32 MiB.
func FetchMaxBytes(n int32) Opt { return func(c *cfg) { c.fetchMaxBytes = n } }

// Linger sets the producer linger, overriding the default 0 (each
// transaction flushes at its end anyway).
func Linger(d time.Duration) Opt { return func(c *cfg) { c.linger = d } }

// TransactionTimeout sets the transaction timeout, overriding the default
// 10s: how long read_committed readers stay blocked behind an instance that
// died mid-transaction and never came back.
func TransactionTimeout(d time.Duration) Opt { return func(c *cfg) { c.eos.TransactionTimeout = d } }

// ShutdownTimeout bounds the shutdown after ctx ends, overriding the
// default 15s.
func ShutdownTimeout(d time.Duration) Opt { return func(c *cfg) { c.eos.ShutdownTimeout = d } }

// TopicWait bounds how long the worker waits at start for an input,
// output or DLQ topic that does not exist yet (or has a partition without
// a leader yet), overriding the default 30s; 0 turns the wait off. After it
// a missing output or DLQ ends Run with ErrMissingTopic.
func TopicWait(d time.Duration) Opt { return func(c *cfg) { c.eos.TopicWait = eos.NoWait(d) } }

// TopUpWait bounds one more poll after a poll that returned fewer than
// MaxPollRecords records, whose records join the same transaction,
// overriding the default DefaultTopUpWait; 0 turns it off. At a low input
// rate it commits what arrived during the last transaction one
// transaction sooner (see docs/latency.md).
func TopUpWait(d time.Duration) Opt { return func(c *cfg) { c.eos.TopUpWait = eos.NoWait(d) } }

// Backoff sets the retry backoff after a failed batch, overriding the
// default 100ms doubling to 5s.
func Backoff(min, max time.Duration) Opt {
	return func(c *cfg) { c.eos.BackoffMin, c.eos.BackoffMax = min, max }
}

// SessionTimeout sets the group session timeout, overriding the default
// 10s (franz-go's own is 45s): how long the group waits for a member that
// died before it hands its partitions to the others.
func SessionTimeout(d time.Duration) Opt { return func(c *cfg) { c.eos.SessionTimeout = d } }

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

// Logger sets the logger, overriding the default that discards.
func Logger(l *slog.Logger) Opt { return func(c *cfg) { c.eos.Logger = l } }

// Registerer sets where the worker registers its metrics; nil (the
// default) registers them nowhere.
func Registerer(r prometheus.Registerer) Opt { return func(c *cfg) { c.eos.Registerer = r } }

// KafkaOpts adds franz-go options (TLS, SASL, tuning). They are applied
// after the worker's own, so they override them.
func KafkaOpts(opts ...kgo.Opt) Opt {
	return func(c *cfg) { c.eos.KafkaOpts = append(c.eos.KafkaOpts, opts...) }
}

// Bounded makes the run a bounded one, for replays: records of a partition
// at or after its offset in stop are consumed but neither numbered nor
// produced, and after every committed transaction done is called with the
// group's committed offsets; true ends Run without error. Transaction
// markers are always read (and never numbered), so a bound on a marker is
// reached. See eos.Bound.
func Bounded(stop map[string]map[int32]int64, done func(committed map[string]map[int32]kgo.EpochOffset) bool) Opt {
	return func(c *cfg) { c.eos.Bound = &eos.Bound{Stop: stop, Done: done} }
}

// BeforeProduce sets the orphaned-transaction guard: called before the
// first produce of every session and after every aborted transaction, with
// the output and DLQ partitions. See eos.Config.BeforeProduce.
func BeforeProduce(f func(ctx context.Context, cl *kgo.Client, partitions map[string][]int32) error) Opt {
	return func(c *cfg) { c.eos.BeforeProduce = f }
}

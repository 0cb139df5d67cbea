package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"time"

	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/idgen"
	"github.com/flakestream/flakestream/internal/eos"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Numberer issues increasing numbers in blocks: *idgen.Generator, or an
// *idgen.Prefetcher over one.
type Numberer = idgen.Numberer

// StartOffset is where a consumer group with no committed offsets starts.
type StartOffset string

// Start offsets.
const (
	StartEarliest StartOffset = "earliest"
	StartLatest   StartOffset = "latest"
)

// Errors of configuration: NewWorker returns them before anything
// connects. The shared ones are the eos loop's, so errors.Is holds for
// either name.
var (
	ErrNoBrokers  = eos.ErrNoBrokers
	ErrNoInput    = eos.ErrNoInput
	ErrNoOutput   = errors.New("pipeline: no output topic")
	ErrNoGroup    = eos.ErrNoGroup
	ErrNoNumberer = errors.New("pipeline: no numberer")
	ErrNoInstance = eos.ErrNoInstance
	ErrSameTopic  = eos.ErrSameTopic
	ErrBadConfig  = eos.ErrBadConfig
)

// Errors of a running worker. Run returns ErrFatal and ErrMissingTopic;
// Ready reports the passing ones (ErrNumbering, ErrCommitAborted) while the
// batch is retried.
var (
	// ErrMissingTopic: the output or DLQ topic does not exist and
	// CreateTopics is off.
	ErrMissingTopic = eos.ErrMissingTopic
	// ErrFatal: retrying cannot help (fenced, not authorized).
	ErrFatal = eos.ErrFatal
	// ErrNumbering: the batch could not be numbered: the sequencer
	// (Redis) or the idempotency key store failed.
	ErrNumbering = errors.New("pipeline: numbering failed")
	// ErrCommitAborted: a produce failed, so the transaction was aborted.
	ErrCommitAborted = eos.ErrCommitAborted
)

// Opt configures a Worker.
type Opt func(*cfg)

type cfg struct {
	eos           eos.Config
	start         StartOffset
	output        string
	dlq           string
	numberer      Numberer
	codec         *codec.Codec
	maxBuffered   int
	fetchMaxBytes int32
	linger        time.Duration
	createTopics  bool
	prefetch      int
	parallelism   int
	idem          *Idempotency
	prefetchAge   time.Duration
}

func defaultCfg() cfg {
	host, _ := os.Hostname()
	return cfg{
		eos: eos.Config{
			Name:               "worker",
			InstanceID:         host,
			MaxPollRecords:     eos.DefaultMaxPollRecords,
			TransactionTimeout: eos.DefaultTransactionTimeout,
			ShutdownTimeout:    eos.DefaultShutdownTimeout,
			SessionTimeout:     eos.DefaultSessionTimeout,
			BackoffMin:         eos.DefaultBackoffMin,
			BackoffMax:         eos.DefaultBackoffMax,
			Logger:             slog.New(slog.DiscardHandler),
		},
		start:         StartEarliest,
		maxBuffered:   100000,
		fetchMaxBytes: 32 << 20,
		linger:        0,
		prefetch:      -1,
		parallelism:   runtime.GOMAXPROCS(0),
		prefetchAge:   time.Second,
	}
}

func (c *cfg) validate() error {
	if err := c.validateLoop(); err != nil {
		return err
	}
	if c.numberer == nil {
		return ErrNoNumberer
	}
	if c.idem != nil && c.idem.Store == nil {
		return fmt.Errorf("%w: no key store", ErrIdempotencyKey)
	}
	if c.parallelism < 1 {
		c.parallelism = 1
	}
	if c.prefetch < 0 {
		c.prefetch = 2 * c.eos.MaxPollRecords
	}
	return c.validateCodec()
}

// validateLoop checks what the eos loop and the topics need and sets the
// worker's own client options.
func (c *cfg) validateLoop() error {
	e := &c.eos
	switch {
	case len(e.Brokers) == 0:
		return ErrNoBrokers
	case len(e.Topics) == 0:
		return ErrNoInput
	case c.output == "":
		return ErrNoOutput
	case e.Group == "":
		return ErrNoGroup
	}
	if c.dlq == "" {
		c.dlq = e.Topics[0] + ".dlq"
	}
	if err := e.CheckNotInput(c.output, c.dlq); err != nil {
		return err
	}
	if err := e.Validate(); err != nil {
		return err
	}
	if c.start != StartEarliest && c.start != StartLatest {
		return fmt.Errorf("%w: start offset %q: want earliest or latest", ErrBadConfig, c.start)
	}
	e.StartAtEnd = c.start == StartLatest
	if e.MaxPollRecords < 1 || c.maxBuffered < e.MaxPollRecords {
		return fmt.Errorf("%w: max poll records %d, max buffered records %d: want 1 <= poll <= buffered", ErrBadConfig, e.MaxPollRecords, c.maxBuffered)
	}
	e.ClientOpts = append([]kgo.Opt{
		kgo.FetchMaxBytes(c.fetchMaxBytes),
		kgo.MaxBufferedRecords(c.maxBuffered),
		kgo.ProducerLinger(c.linger),
	}, e.ClientOpts...)
	return nil
}

// LoopConfig returns the eos loop settings that opts describe, and the
// output topic, for a step that runs with the worker's Kafka settings
// instead of the worker (the bench's baselines). Numbers is not needed.
func LoopConfig(opts ...Opt) (eos.Config, string, error) {
	c := defaultCfg()
	for _, o := range opts {
		o(&c)
	}
	if err := c.validateLoop(); err != nil {
		return eos.Config{}, "", err
	}
	return c.eos, c.output, nil
}

// validateCodec fills in the default codec.
func (c *cfg) validateCodec() error {
	if c.codec == nil {
		cd, err := codec.New(codec.Config{})
		if err != nil {
			return err
		}
		c.codec = cd
	}
	return nil
}

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

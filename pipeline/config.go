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
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Numberer issues increasing numbers in blocks. *idgen.Generator is one.
type Numberer interface {
	AppendN(ctx context.Context, dst []int64, n int) ([]int64, error)
}

// StartOffset is where a consumer group with no committed offsets starts.
type StartOffset string

// Start offsets.
const (
	StartEarliest StartOffset = "earliest"
	StartLatest   StartOffset = "latest"
)

// Errors of worker configuration; a bad configuration is fatal.
var (
	ErrNoBrokers     = errors.New("pipeline: no brokers")
	ErrNoInput       = errors.New("pipeline: no input topic")
	ErrNoOutput      = errors.New("pipeline: no output topic")
	ErrNoGroup       = errors.New("pipeline: no consumer group")
	ErrNoNumberer    = errors.New("pipeline: no numberer")
	ErrNoInstance    = errors.New("pipeline: no instance id")
	ErrSameTopic     = errors.New("pipeline: output or dlq topic is also an input topic")
	ErrBadConfig     = errors.New("pipeline: invalid configuration")
	ErrMissingTopic  = errors.New("pipeline: topic does not exist")
	ErrFatal         = errors.New("pipeline: fatal")
	ErrRedisDown     = errors.New("pipeline: numbering failed")
	ErrCommitAborted = errors.New("pipeline: transaction aborted")
)

// Opt configures a Worker.
type Opt func(*cfg)

type cfg struct {
	brokers         []string
	inputs          []string
	output          string
	dlq             string
	group           string
	instanceID      string
	txnID           string
	numberer        Numberer
	codec           *codec.Codec
	numbering       bool
	start           StartOffset
	maxPollRecords  int
	maxBuffered     int
	fetchMaxBytes   int32
	linger          time.Duration
	txnTimeout      time.Duration
	shutdownTimeout time.Duration
	backoffMin      time.Duration
	backoffMax      time.Duration
	createTopics    bool
	sessionTimeout  time.Duration
	static          bool
	perRecord       bool
	prefetch        int
	parallelism     int
	idem            *Idempotency
	stopAt          map[string]map[int32]int64
	afterCommit     func(map[string]map[int32]kgo.EpochOffset) bool
	keepControl     bool
	prefetchAge     time.Duration
	logger          *slog.Logger
	registerer      prometheus.Registerer
	orphanGuard     bool
	kafkaOpts       []kgo.Opt
}

func defaultCfg() cfg {
	host, _ := os.Hostname()
	return cfg{
		numbering:       true,
		start:           StartEarliest,
		instanceID:      host,
		maxPollRecords:  10000,
		maxBuffered:     100000,
		fetchMaxBytes:   32 << 20,
		linger:          0,
		txnTimeout:      10 * time.Second,
		shutdownTimeout: 15 * time.Second,
		sessionTimeout:  10 * time.Second,
		prefetch:        -1,
		parallelism:     runtime.GOMAXPROCS(0),
		prefetchAge:     time.Second,
		backoffMin:      100 * time.Millisecond,
		backoffMax:      5 * time.Second,
		logger:          slog.New(slog.DiscardHandler),
		orphanGuard:     true,
	}
}

func (c *cfg) validate() error {
	switch {
	case len(c.brokers) == 0:
		return ErrNoBrokers
	case len(c.inputs) == 0:
		return ErrNoInput
	case c.output == "":
		return ErrNoOutput
	case c.group == "":
		return ErrNoGroup
	case c.numbering && c.numberer == nil:
		return ErrNoNumberer
	case c.instanceID == "" && c.txnID == "":
		return ErrNoInstance
	}
	if c.dlq == "" {
		c.dlq = c.inputs[0] + ".dlq"
	}
	for _, in := range c.inputs {
		if in == c.output || in == c.dlq {
			return fmt.Errorf("%w: %s", ErrSameTopic, in)
		}
	}
	if c.txnID == "" {
		c.txnID = "flakestream-" + c.group + "-" + c.instanceID
	}
	if c.idem != nil && c.idem.Store == nil {
		return fmt.Errorf("%w: no key store", ErrIdempotencyKey)
	}
	if c.perRecord || c.parallelism < 1 {
		c.parallelism = 1 // the origin's way is one record at a time
	}
	if c.prefetch < 0 {
		c.prefetch = 2 * c.maxPollRecords
	}
	if c.sessionTimeout < 2*time.Second {
		return fmt.Errorf("%w: session timeout %s: want at least 2s", ErrBadConfig, c.sessionTimeout)
	}
	if c.start != StartEarliest && c.start != StartLatest {
		return fmt.Errorf("%w: start offset %q: want earliest or latest", ErrBadConfig, c.start)
	}
	if c.maxPollRecords < 1 || c.maxBuffered < c.maxPollRecords {
		return fmt.Errorf("%w: max poll records %d, max buffered records %d: want 1 <= poll <= buffered", ErrBadConfig, c.maxPollRecords, c.maxBuffered)
	}
	if c.txnTimeout < time.Second || c.txnTimeout > 15*time.Minute {
		return fmt.Errorf("%w: transaction timeout %s: want 1s to 15m", ErrBadConfig, c.txnTimeout)
	}
	return c.validateCodec()
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
func Brokers(addrs ...string) Opt { return func(c *cfg) { c.brokers = addrs } }

// InputTopics sets the topics of unnumbered order events. Required.
func InputTopics(topics ...string) Opt { return func(c *cfg) { c.inputs = topics } }

// OutputTopic sets the topic numbered events go to. Required.
func OutputTopic(t string) Opt { return func(c *cfg) { c.output = t } }

// DLQTopic sets the dead-letter topic, overriding the default
// "<first input topic>.dlq".
func DLQTopic(t string) Opt { return func(c *cfg) { c.dlq = t } }

// Group sets the consumer group. Required.
func Group(g string) Opt { return func(c *cfg) { c.group = g } }

// InstanceID names this instance, overriding the default host name (unique
// per pod in Kubernetes). The transactional ID is derived from it, so a
// restarted instance fences its predecessor's open transaction at once
// instead of leaving read_committed readers stalled until it times out.
func InstanceID(id string) Opt { return func(c *cfg) { c.instanceID = id } }

// TransactionalID sets the transactional ID outright, overriding the default
// "flakestream-<group>-<instance id>".
func TransactionalID(id string) Opt { return func(c *cfg) { c.txnID = id } }

// Numbers sets where numbers come from. Required unless numbering is off.
func Numbers(n Numberer) Opt { return func(c *cfg) { c.numberer = n } }

// Codec sets the order-event codec, overriding codec.New(codec.Config{}).
func Codec(cd *codec.Codec) Opt { return func(c *cfg) { c.codec = cd } }

// NumberingOff makes the worker copy records without inspecting or
// numbering them: the same consume-produce loop, for measuring the ceiling.
func NumberingOff() Opt { return func(c *cfg) { c.numbering = false } }

// Start sets where a group with no committed offsets starts, overriding the
// default StartEarliest (so that no order is skipped).
func Start(s StartOffset) Opt { return func(c *cfg) { c.start = s } }

// MaxPollRecords bounds the records of one transaction, overriding the
// default 10,000.
func MaxPollRecords(n int) Opt { return func(c *cfg) { c.maxPollRecords = n } }

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
func TransactionTimeout(d time.Duration) Opt { return func(c *cfg) { c.txnTimeout = d } }

// ShutdownTimeout bounds the shutdown after ctx ends, overriding the
// default 15s.
func ShutdownTimeout(d time.Duration) Opt { return func(c *cfg) { c.shutdownTimeout = d } }

// Backoff sets the retry backoff after a failed batch, overriding the
// default 100ms doubling to 5s.
func Backoff(min, max time.Duration) Opt {
	return func(c *cfg) { c.backoffMin, c.backoffMax = min, max }
}

// SessionTimeout sets the group session timeout, overriding the default
// 10s (franz-go's own is 45s): how long the group waits for a member that
// died before it hands its partitions to the others.
func SessionTimeout(d time.Duration) Opt { return func(c *cfg) { c.sessionTimeout = d } }

// StaticMembership makes the instance ID the group instance ID (KIP-345):
// an instance that restarts under the same ID takes its partitions back at
// once, without a rebalance. A member that stops for good is only removed
// after the session timeout, so use it where instances come back under
// their names (a StatefulSet), not where they are scaled away.
func StaticMembership() Opt { return func(c *cfg) { c.static = true } }

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

// PerRecord numbers and produces the origin's way, for comparison in the
// bench command only: one sequencer round trip per number and one
// synchronous produce per record, inside the same transactions.
func PerRecord() Opt { return func(c *cfg) { c.perRecord = true } }

// CreateTopics makes the worker create a missing output or DLQ topic with
// as many partitions as the first input topic, instead of refusing to start.
func CreateTopics() Opt { return func(c *cfg) { c.createTopics = true } }

// Logger sets the logger, overriding the default that discards.
func Logger(l *slog.Logger) Opt { return func(c *cfg) { c.logger = l } }

// Registerer sets where the worker registers its metrics; nil (the
// default) registers them nowhere.
func Registerer(r prometheus.Registerer) Opt { return func(c *cfg) { c.registerer = r } }

// OrphanGuard turns the orphaned-transaction guard (internal/txnguard) on or
// off, overriding the default on: before the first produce of a session and
// after every aborted transaction, the worker aborts a transaction its own
// producer ID left open at an older epoch on the output and DLQ partitions
// that the coordinator no longer tracks.
func OrphanGuard(on bool) Opt { return func(c *cfg) { c.orphanGuard = on } }

// KafkaOpts adds franz-go options (TLS, SASL, tuning). They are applied
// after the worker's own, so they override them.
func KafkaOpts(opts ...kgo.Opt) Opt {
	return func(c *cfg) { c.kafkaOpts = append(c.kafkaOpts, opts...) }
}

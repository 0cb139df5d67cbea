package eos

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Mode is how a loop commits.
type Mode int

const (
	// Transactional (the default): each batch is one Kafka transaction
	// holding the step's records and the consumed offsets. Exactly once.
	Transactional Mode = iota
	// AtLeastOnce: a plain group consumer that commits the offsets after
	// the step has handled a batch; the step produces nothing to Kafka
	// (the auditor without an audit topic). A crash between the two
	// hands the batch over again.
	AtLeastOnce
)

// Defaults of Config, shared by the worker and the auditor.
const (
	DefaultMaxPollRecords     = 10000
	DefaultTransactionTimeout = 10 * time.Second
	DefaultSessionTimeout     = 10 * time.Second
	DefaultShutdownTimeout    = 15 * time.Second
	DefaultBackoffMin         = 100 * time.Millisecond
	DefaultBackoffMax         = 5 * time.Second
	DefaultLagEvery           = 10 * time.Second
	DefaultTopicWait          = 30 * time.Second
)

// Config is the one set of settings the worker and the auditor share. A
// zero field means the default given in its comment; Validate fills them in.
type Config struct {
	// Brokers are the seed brokers. Required (ErrNoBrokers).
	Brokers []string
	// Topics are the topics consumed. Required (ErrNoInput).
	Topics []string
	// Group is the consumer group. Required (ErrNoGroup).
	Group string
	// InstanceID names this instance (the products default it to the host
	// name); Transactional mode needs it or TransactionalID
	// (ErrNoInstance). The transactional ID is derived from it, so a restarted instance fences
	// its predecessor's open transaction at once.
	InstanceID string
	// TransactionalID overrides "flakestream-<Group>-<InstanceID>".
	TransactionalID string
	// Mode is Transactional (default) or AtLeastOnce.
	Mode Mode
	// StartAtEnd makes a group without committed offsets start at the end
	// of each partition instead of the start (the default, so that
	// nothing is skipped).
	StartAtEnd bool
	// Static makes InstanceID the group instance ID (KIP-345).
	Static bool
	// MaxPollRecords bounds one batch (one transaction); default 10,000.
	MaxPollRecords int
	// TransactionTimeout: default 10s, 1s to 15m (ErrBadConfig).
	TransactionTimeout time.Duration
	// SessionTimeout is the group session timeout: default 10s, at least
	// 2s (ErrBadConfig).
	SessionTimeout time.Duration
	// ShutdownTimeout bounds ending a transaction and closing the client;
	// default 15s.
	ShutdownTimeout time.Duration
	// BackoffMin and BackoffMax bound the retry backoff after a failed
	// batch: default 100ms doubling to 5s.
	BackoffMin, BackoffMax time.Duration
	// TopUpWait, in Transactional mode, bounds one more poll after a poll
	// that returned fewer than MaxPollRecords records, whose records join
	// the same transaction (see Loop.topUp): what arrived during the last
	// transaction is committed one transaction sooner. Default 0: off.
	TopUpWait time.Duration
	// LagEvery is how often the lag gauge is refreshed; default 10s.
	LagEvery time.Duration
	// TopicWait bounds how long Session.CheckTopics waits for a topic that
	// does not exist yet, or whose partitions have no leader yet, before
	// it gives up (ErrMissingTopic for a missing output); default 30s,
	// negative: no wait.
	TopicWait time.Duration
	// Logger: default discards.
	Logger *slog.Logger
	// Registerer receives franz-go's client metrics (plugin/kprom) under
	// MetricsNamespace; nil registers none.
	Registerer       prometheus.Registerer
	MetricsNamespace string
	// ClientOpts are the step's own franz-go options (producer tuning);
	// KafkaOpts the user's (TLS, SASL, tuning), applied last so that they
	// override everything.
	ClientOpts, KafkaOpts []kgo.Opt
	// Bound, if set, makes the run bounded; see Bound.
	Bound *Bound
	// BeforeProduce, if set, is the orphaned-transaction guard's hook
	// (internal/txnguard; the CLI's --orphan-guard). In Transactional mode
	// the loop calls it:
	//   - at the start of every session, after Step.Start and before the
	//     first poll, before anything has asked the client for its
	//     producer ID: an orphan on __consumer_offsets holds the group's
	//     offsets unstable (UNSTABLE_OFFSET_COMMIT), so the session would
	//     never poll a record, let alone produce one. An error wrapping
	//     ErrFatal ends Run; any other replaces the session after a
	//     backoff, which calls it again.
	//   - after every transaction that did not commit (an abort, a
	//     rebalance, a failed produce), before the next poll: the abort
	//     has rewound the consumer to the committed offsets, no
	//     transaction is open, and an orphan left on __consumer_offsets
	//     would hold that poll on UNSTABLE_OFFSET_COMMIT. An error is
	//     retried after a backoff, before anything is polled (ErrFatal
	//     ends Run).
	// partitions are what Step.Start returned (the output and DLQ topics;
	// the audit topic for the auditor) and ConsumerOffsetsTopic with nil
	// partitions (all of them). nil calls nothing.
	BeforeProduce func(ctx context.Context, cl *kgo.Client, partitions map[string][]int32) error
	// Name is how the logs call the loop's owner ("worker", "audit").
	Name string
}

// Metrics are where a loop reports, each optional: Lag is set to each
// consumed partition's lag (labels topic, partition); Transactions counts
// ended transactions (AtLeastOnce: batches) by result (label result:
// committed, aborted); Phases (NewPhaseHistogram) observes each committed
// transaction's phases (label phase, see Phases; Transactional mode only).
type Metrics struct {
	Lag          *prometheus.GaugeVec
	Transactions *prometheus.CounterVec
	Phases       *prometheus.HistogramVec
}

// DefaultConfig is a Config with every default set, for the product name
// (its log lines say it) and the host name as the instance ID.
func DefaultConfig(name string) Config {
	host, _ := os.Hostname()
	return Config{
		Name: name, InstanceID: host, MaxPollRecords: DefaultMaxPollRecords,
		TransactionTimeout: DefaultTransactionTimeout, SessionTimeout: DefaultSessionTimeout,
		ShutdownTimeout: DefaultShutdownTimeout, BackoffMin: DefaultBackoffMin, BackoffMax: DefaultBackoffMax,
		LagEvery: DefaultLagEvery, TopicWait: DefaultTopicWait, Logger: slog.New(slog.DiscardHandler),
	}
}

// Bound makes a run bounded: a replay of an offset range that ends once
// every partition has reached its end.
//
// Records at or after a partition's Stop offset are consumed (their
// offsets are committed with the next transaction) but never handed to the
// step. Transaction markers are never handed to the step either, but the
// loop always reads them, so a range that ends on a marker, which a
// consumer never sees as a record, still counts as reached. After every
// committed transaction Done is called with the group's committed offsets;
// true ends Run without error.
type Bound struct {
	Stop map[string]map[int32]int64
	Done func(committed map[string]map[int32]kgo.EpochOffset) bool
}

// Validate checks the shared settings and fills in the defaults.
func (c *Config) Validate() error {
	switch {
	case len(c.Brokers) == 0:
		return ErrNoBrokers
	case len(c.Topics) == 0:
		return ErrNoInput
	case c.Group == "":
		return ErrNoGroup
	case c.Mode == Transactional && c.InstanceID == "" && c.TransactionalID == "":
		return ErrNoInstance
	}
	if c.TransactionalID == "" {
		c.TransactionalID = "flakestream-" + c.Group + "-" + c.InstanceID
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.TransactionTimeout, DefaultTransactionTimeout)
	def(&c.SessionTimeout, DefaultSessionTimeout)
	def(&c.ShutdownTimeout, DefaultShutdownTimeout)
	def(&c.BackoffMin, DefaultBackoffMin)
	def(&c.BackoffMax, DefaultBackoffMax)
	def(&c.LagEvery, DefaultLagEvery)
	def(&c.TopicWait, DefaultTopicWait)
	if c.MaxPollRecords == 0 {
		c.MaxPollRecords = DefaultMaxPollRecords
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.MetricsNamespace == "" {
		c.MetricsNamespace = "flakestream"
	}
	if c.Name == "" {
		c.Name = "consumer"
	}
	if c.MaxPollRecords < 1 {
		return fmt.Errorf("%w: max poll records %d: want at least 1", ErrBadConfig, c.MaxPollRecords)
	}
	if c.SessionTimeout < 2*time.Second {
		return fmt.Errorf("%w: session timeout %s: want at least 2s", ErrBadConfig, c.SessionTimeout)
	}
	if c.TransactionTimeout < time.Second || c.TransactionTimeout > 15*time.Minute {
		return fmt.Errorf("%w: transaction timeout %s: want 1s to 15m", ErrBadConfig, c.TransactionTimeout)
	}
	return nil
}

// NoWait maps a user's wait d, where 0 means "do not wait", onto a Config
// field where 0 means the default: 0 and below become -1.
func NoWait(d time.Duration) time.Duration {
	if d <= 0 {
		return -1
	}
	return d
}

// CheckNotInput returns ErrSameTopic if any of topics is consumed.
func (c *Config) CheckNotInput(topics ...string) error {
	for _, in := range c.Topics {
		for _, t := range topics {
			if t != "" && in == t {
				return fmt.Errorf("%w: %s", ErrSameTopic, in)
			}
		}
	}
	return nil
}

// Configure applies a product's functional options to its settings c, in
// order, then validates them: the one way the products read their options.
func Configure[C any, O ~func(*C)](c *C, opts []O, validate func() error) error {
	for _, o := range opts {
		o(c)
	}
	return validate()
}

package eos

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Defaults of Config: a zero field means its default.
const (
	DefaultBroker             = "127.0.0.1:9092"
	DefaultMaxPollRecords     = 10000
	DefaultTransactionTimeout = 10 * time.Second
	DefaultSessionTimeout     = 10 * time.Second
	DefaultShutdownTimeout    = 15 * time.Second
	DefaultBackoffMin         = 100 * time.Millisecond
	DefaultBackoffMax         = 5 * time.Second
	DefaultTopicWait          = 30 * time.Second
)

// Errors of configuration: the products' constructors return them before
// anything connects. The messages keep the "pipeline:" prefix they have
// always had, since users and scripts match on them.
var (
	ErrNoBrokers  = errors.New("pipeline: no brokers")
	ErrNoInput    = errors.New("pipeline: no input topic")
	ErrNoGroup    = errors.New("pipeline: no consumer group")
	ErrNoInstance = errors.New("pipeline: no instance id")
	ErrSameTopic  = errors.New("pipeline: output or dlq topic is also an input topic")
	ErrBadConfig  = errors.New("pipeline: invalid configuration")
)

// Errors of a running loop: Run returns ErrFatal or ErrMissingTopic (the
// latter, like ErrListTopics, wrapped in an error that says which topic or
// why); ErrCommitAborted fails one batch, which is retried, and Ready
// reports it until a batch commits.
var (
	// ErrMissingTopic: a topic the product produces to does not exist and
	// may not be created.
	ErrMissingTopic = errors.New("pipeline: topic does not exist")
	// ErrListTopics: the brokers did not answer a topic listing at the
	// start of a session, after retries (wrong addresses, TLS or SASL
	// settings, or the brokers are down). Fatal.
	ErrListTopics = errors.New("list topics")
	// ErrFatal: retrying cannot help (not authorized, a closed output).
	// The cause is wrapped too, so errors.Is(err,
	// kerr.TopicAuthorizationFailed) holds for the caller.
	ErrFatal = errors.New("pipeline: fatal")
	// ErrCommitAborted: a produce failed, so the transaction was aborted;
	// its records are read again.
	ErrCommitAborted = errors.New("pipeline: transaction aborted")
)

// Config is the loop's configuration, one type for every product that runs
// the loop: which cluster, topics and group, under which transactional
// identity, within which bounds, and how the loop commits. A zero field
// means the default in its comment; Validate fills the defaults in and
// checks the rest. A product takes a Config and sets Name, Mode and the
// other fields it decides itself.
type Config struct {
	// Brokers are the seed brokers. Required (ErrNoBrokers).
	Brokers []string
	// Topics are the topics consumed. Required (ErrNoInput).
	Topics []string
	// Group is the consumer group. Required (ErrNoGroup) by the worker;
	// the auditor defaults it to its own.
	Group string
	// InstanceID names this instance: default the host name (unique per
	// pod in Kubernetes). The transactional ID is derived from it, so a
	// restarted instance fences its predecessor's open transaction at once
	// instead of leaving read_committed readers stalled until it times
	// out. A transactional product with neither it nor a host name nor
	// TransactionalID fails with ErrNoInstance.
	InstanceID string
	// TransactionalID overrides "flakestream-<Group>-<InstanceID>".
	TransactionalID string
	// MaxPollRecords bounds one batch (one transaction): default 10,000,
	// at least 1 (ErrBadConfig).
	MaxPollRecords int
	// TransactionTimeout: default 10s, 1s to 15m (ErrBadConfig): how long
	// read_committed readers stay blocked behind an instance that died
	// mid-transaction and never came back.
	TransactionTimeout time.Duration
	// SessionTimeout is the group session timeout: default 10s (franz-go's
	// own is 45s), at least 2s (ErrBadConfig): how long the group waits
	// for a member that died before it hands its partitions on.
	SessionTimeout time.Duration
	// ShutdownTimeout bounds ending the open transaction and leaving the
	// group after the context ends: default 15s.
	ShutdownTimeout time.Duration
	// TopicWait bounds how long a session waits at start for a topic that
	// does not exist yet, or has a partition without a leader yet: default
	// 30s; negative (see NoWait): no wait. After it a missing output ends
	// Run with ErrMissingTopic.
	TopicWait time.Duration
	// BackoffMin and BackoffMax bound the retry backoff after a failed
	// batch: default 100ms doubling to 5s.
	BackoffMin, BackoffMax time.Duration
	// Logger: default discards.
	Logger *slog.Logger
	// Registerer receives the product's metrics and franz-go's client
	// metrics; nil (the default) registers them nowhere.
	Registerer prometheus.Registerer
	// KafkaOpts are franz-go options (TLS, SASL, tuning), applied after
	// the product's own, so they override them.
	KafkaOpts []kgo.Opt
	// Principal is who the brokers see KafkaOpts sign in as ("User:NAME"),
	// named in the one line of an authorization error; default: unknown.
	Principal string
	// BeforeProduce, if set, is the orphaned-transaction guard
	// (eos/txnguard; the CLI's --orphan-guard): a transactional
	// product calls it before the first poll of every session and after
	// every transaction that did not commit, with the partitions it
	// produces to and all of __consumer_offsets (nil partitions). An error
	// wrapping ErrFatal ends Run; any other is retried after a backoff.
	BeforeProduce func(ctx context.Context, cl *kgo.Client, partitions map[string][]int32) error
	// IdleGuard is how long a transactional session that has committed
	// since BeforeProduce last ran waits on an empty poll before it runs
	// BeforeProduce once more: default TransactionTimeout (how long
	// read_committed readers may be held by an open transaction anyway),
	// negative for never. Why: a coordinator that restarts uncleanly can
	// lose the markers of a transaction that committed; what it left
	// open stays open until this producer's next marker. A member with
	// nothing to produce sends none, so an output partition's readers
	// stay held, and the group's offsets stay pending: the member given
	// those partitions next (this one too, after a rebalance) cannot read
	// them (UNSTABLE_OFFSET_COMMIT) and polls nothing, for good.
	IdleGuard time.Duration

	// What the product decides about how its loop runs.

	// Mode is Transactional (default) or AtLeastOnce.
	Mode Mode
	// StartAtEnd makes a group without committed offsets start at the end
	// of each partition instead of the start (the default, so that
	// nothing is skipped).
	StartAtEnd bool
	// Static makes InstanceID the group instance ID (KIP-345).
	Static bool
	// TopUpWait, in Transactional mode, bounds one more poll after a poll
	// that returned fewer than MaxPollRecords records, whose records join
	// the same transaction (see Loop.topUp): what arrived during the last
	// transaction is committed one transaction sooner. Default 0: off.
	TopUpWait time.Duration
	// MarkerWait, in Transactional mode, bounds how long the first
	// produce of a transaction waits for the coordinator to finish the
	// markers of the transaction before it (see markers): default
	// DefaultMarkerWait, negative turns the wait off.
	MarkerWait time.Duration
	// LagEvery is how often the lag gauge is refreshed; default 10s.
	LagEvery time.Duration
	// MetricsNamespace is the namespace of franz-go's client metrics
	// (plugin/kprom) on Registerer; default "flakestream".
	MetricsNamespace string
	// ClientOpts are the step's own franz-go options (producer tuning),
	// applied before KafkaOpts.
	ClientOpts []kgo.Opt
	// Bound, if set, makes the run bounded; see Bound.
	Bound *Bound
	// Name is how the logs call the loop's owner ("worker", "audit").
	Name string
	// Fences counts this process's fences (Transactional mode); loops of
	// one process (lanes) share one. Default: the loop's own.
	Fences *Fences
	// FenceLimit fences within FenceWindow end Run with a SharedIDError
	// wrapping ErrFatal; default DefaultFenceLimit, negative: never.
	FenceLimit int
	// FenceWindow: default three transaction timeouts. A fence that
	// merely happens comes at most once a transaction timeout (a
	// transaction timed out while the process hung); two processes on one
	// transactional ID fence each other every few seconds.
	FenceWindow time.Duration
}

// NoWait maps a user's wait d, where 0 means "do not wait" (the CLI's
// --topic-wait 0), onto a field where 0 means the default: 0 and below
// become -1.
func NoWait(d time.Duration) time.Duration {
	if d <= 0 {
		return -1
	}
	return d
}

// DefaultInstanceID is the instance ID of a Config that gives none: the
// host name, unique per pod in Kubernetes.
func DefaultInstanceID() string {
	host, _ := os.Hostname()
	return host
}

// Validate checks s and fills in its defaults.
func (s *Config) validateCommon() error {
	switch {
	case len(s.Brokers) == 0:
		return ErrNoBrokers
	case len(s.Topics) == 0:
		return ErrNoInput
	case s.Group == "":
		return ErrNoGroup
	}
	if s.InstanceID == "" {
		s.InstanceID = DefaultInstanceID()
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&s.TransactionTimeout, DefaultTransactionTimeout)
	def(&s.SessionTimeout, DefaultSessionTimeout)
	def(&s.ShutdownTimeout, DefaultShutdownTimeout)
	def(&s.BackoffMin, DefaultBackoffMin)
	def(&s.BackoffMax, DefaultBackoffMax)
	def(&s.TopicWait, DefaultTopicWait)
	def(&s.IdleGuard, s.TransactionTimeout)
	def(&s.MarkerWait, DefaultMarkerWait)
	if s.MaxPollRecords == 0 {
		s.MaxPollRecords = DefaultMaxPollRecords
	}
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case s.MaxPollRecords < 1:
		return fmt.Errorf("%w: max poll records %d: want at least 1", ErrBadConfig, s.MaxPollRecords)
	case s.SessionTimeout < 2*time.Second:
		return fmt.Errorf("%w: session timeout %s: want at least 2s", ErrBadConfig, s.SessionTimeout)
	case s.TransactionTimeout < time.Second || s.TransactionTimeout > 15*time.Minute:
		return fmt.Errorf("%w: transaction timeout %s: want 1s to 15m", ErrBadConfig, s.TransactionTimeout)
	case s.BackoffMin < 0 || s.BackoffMax < s.BackoffMin:
		return fmt.Errorf("%w: backoff %s to %s: want 0 <= min <= max", ErrBadConfig, s.BackoffMin, s.BackoffMax)
	}
	return nil
}

// NewClient opens a plain Kafka client of the config's brokers and
// options (no group, no transactions), for requests beside the loop: the
// caller closes it.
func (s *Config) NewClient() (*kgo.Client, error) {
	return kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(s.Brokers...)}, s.KafkaOpts...)...)
}

// CheckNotInput returns ErrSameTopic if any of topics is consumed.
func (s *Config) CheckNotInput(topics ...string) error {
	for _, in := range s.Topics {
		for _, t := range topics {
			if t != "" && in == t {
				return fmt.Errorf("%w: %s", ErrSameTopic, in)
			}
		}
	}
	return nil
}

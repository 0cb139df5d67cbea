package eos

import (
	"time"

	"github.com/flakestream/flakestream/pipeline/loop"
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

// DefaultLagEvery is how often the lag gauge is refreshed.
const DefaultLagEvery = 10 * time.Second

// Config is a product's loop: the Settings every product shares (see
// package pipeline/loop), and what the product itself decides about how
// its loop runs. A zero field means the default given in its comment;
// Validate fills them in.
type Config struct {
	loop.Settings
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
	// LagEvery is how often the lag gauge is refreshed; default 10s.
	LagEvery time.Duration
	// MetricsNamespace is the namespace of franz-go's client metrics
	// (plugin/kprom) on Settings.Registerer; default "flakestream".
	MetricsNamespace string
	// ClientOpts are the step's own franz-go options (producer tuning),
	// applied before Settings.KafkaOpts.
	ClientOpts []kgo.Opt
	// Bound, if set, makes the run bounded; see Bound.
	Bound *Bound
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

// Validate checks the settings and fills in the defaults.
func (c *Config) Validate() error {
	if err := c.Settings.Validate(); err != nil {
		return err
	}
	if c.Mode == Transactional && c.InstanceID == "" && c.TransactionalID == "" {
		return loop.ErrNoInstance
	}
	if c.TransactionalID == "" {
		c.TransactionalID = "flakestream-" + c.Group + "-" + c.InstanceID
	}
	if c.LagEvery == 0 {
		c.LagEvery = DefaultLagEvery
	}
	if c.MetricsNamespace == "" {
		c.MetricsNamespace = "flakestream"
	}
	if c.Name == "" {
		c.Name = "consumer"
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

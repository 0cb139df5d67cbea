package eos

import (
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

// DefaultLagEvery is how often the lag gauge is refreshed.
const DefaultLagEvery = 10 * time.Second

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
	if err := c.validateCommon(); err != nil {
		return err
	}
	if c.Mode == Transactional && c.InstanceID == "" && c.TransactionalID == "" {
		return ErrNoInstance
	}
	if c.TransactionalID == "" {
		c.TransactionalID = "flakestream-" + c.Group + "-" + c.InstanceID
	}
	if c.LagEvery == 0 {
		c.LagEvery = DefaultLagEvery
	}
	if c.Fences == nil {
		c.Fences = &Fences{}
	}
	if c.FenceLimit == 0 {
		c.FenceLimit = DefaultFenceLimit
	}
	if c.FenceWindow == 0 {
		c.FenceWindow = 3 * c.TransactionTimeout
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

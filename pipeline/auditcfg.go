package pipeline

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/idgen"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
)

// AuditOpt configures an Auditor.
type AuditOpt func(*auditCfg)

type auditCfg struct {
	brokers         []string
	inputs          []string
	auditTopic      string
	group           string
	instanceID      string
	txnID           string
	layout          idgen.Layout
	field           string
	dupWindow       time.Duration
	dupMaxEntries   int
	maxSkew         time.Duration
	maxLag          time.Duration
	servers         map[int64]struct{}
	workers         map[int64]struct{}
	stdout          io.Writer
	recent          int
	catchUp         bool
	catchUpTimeout  time.Duration
	createTopic     bool
	maxPollRecords  int
	txnTimeout      time.Duration
	sessionTimeout  time.Duration
	shutdownTimeout time.Duration
	backoffMin      time.Duration
	backoffMax      time.Duration
	lagEvery        time.Duration
	now             func() time.Time
	logger          *slog.Logger
	registerer      prometheus.Registerer
	kafkaOpts       []kgo.Opt
}

// Audit defaults.
const (
	// DefaultAuditGroup is the audit consumer's group.
	DefaultAuditGroup = "flakestream-audit"
	// DefaultDupWindow is how long a number is remembered, by number time.
	DefaultDupWindow = 10 * time.Minute
	// DefaultDupMaxEntries bounds the numbers the dup window holds.
	DefaultDupMaxEntries = 10_000_000
	// DefaultMaxSkew is how far ahead of the clock a number may be.
	DefaultMaxSkew = 5 * time.Second
	// DefaultMaxLag is how far apart a record's timestamp and its number's
	// time may be.
	DefaultMaxLag = 5 * time.Minute
)

func defaultAuditCfg() auditCfg {
	host, _ := os.Hostname()
	return auditCfg{
		group:           DefaultAuditGroup,
		instanceID:      host,
		layout:          idgen.DefaultLayout(),
		field:           codec.DefaultField,
		dupWindow:       DefaultDupWindow,
		dupMaxEntries:   DefaultDupMaxEntries,
		maxSkew:         DefaultMaxSkew,
		maxLag:          DefaultMaxLag,
		recent:          50,
		catchUp:         true,
		catchUpTimeout:  DefaultCatchUpTimeout,
		maxPollRecords:  DefaultMaxPollRecords,
		txnTimeout:      DefaultTransactionTimeout,
		sessionTimeout:  DefaultSessionTimeout,
		shutdownTimeout: DefaultShutdownTimeout,
		backoffMin:      100 * time.Millisecond,
		backoffMax:      5 * time.Second,
		lagEvery:        10 * time.Second,
		now:             time.Now,
		logger:          slog.New(slog.DiscardHandler),
	}
}

func (c *auditCfg) validate() error {
	switch {
	case len(c.brokers) == 0:
		return ErrNoBrokers
	case len(c.inputs) == 0:
		return ErrNoInput
	case c.group == "":
		return ErrNoGroup
	case c.auditTopic != "" && c.instanceID == "" && c.txnID == "":
		return ErrNoInstance
	}
	for _, in := range c.inputs {
		if in == c.auditTopic {
			return fmt.Errorf("%w: %s", ErrSameTopic, in)
		}
	}
	if c.txnID == "" {
		c.txnID = "flakestream-" + c.group + "-" + c.instanceID
	}
	if err := c.layout.Validate(); err != nil {
		return fmt.Errorf("%w: layout: %w", ErrBadConfig, err)
	}
	if c.field == "" {
		return fmt.Errorf("%w: empty number field name", ErrBadConfig)
	}
	if c.dupWindow < time.Second || c.dupWindow > 7*24*time.Hour {
		return fmt.Errorf("%w: dup window %s: want 1s to 168h", ErrBadConfig, c.dupWindow)
	}
	if c.dupMaxEntries < 1 {
		return fmt.Errorf("%w: dup max entries %d: want at least 1", ErrBadConfig, c.dupMaxEntries)
	}
	if c.maxSkew < 0 || c.maxLag < 0 {
		return fmt.Errorf("%w: max skew %s, max lag %s: want 0 or more", ErrBadConfig, c.maxSkew, c.maxLag)
	}
	for id := range c.servers {
		if err := c.layout.CheckServer(id); err != nil {
			return fmt.Errorf("%w: allowed servers: %w", ErrBadConfig, err)
		}
	}
	for id := range c.workers {
		if err := c.layout.CheckWorker(id); err != nil {
			return fmt.Errorf("%w: allowed workers: %w", ErrBadConfig, err)
		}
	}
	if c.maxPollRecords < 1 || c.recent < 1 {
		return fmt.Errorf("%w: max poll records %d, recent records %d: want at least 1", ErrBadConfig, c.maxPollRecords, c.recent)
	}
	if c.sessionTimeout < 2*time.Second {
		return fmt.Errorf("%w: session timeout %s: want at least 2s", ErrBadConfig, c.sessionTimeout)
	}
	if c.txnTimeout < time.Second || c.txnTimeout > 15*time.Minute {
		return fmt.Errorf("%w: transaction timeout %s: want 1s to 15m", ErrBadConfig, c.txnTimeout)
	}
	if c.now == nil {
		c.now = time.Now
	}
	return nil
}

// AuditBrokers sets the seed brokers. Required.
func AuditBrokers(addrs ...string) AuditOpt { return func(c *auditCfg) { c.brokers = addrs } }

// AuditInputTopics sets the numbered topics to audit. Required.
func AuditInputTopics(topics ...string) AuditOpt { return func(c *auditCfg) { c.inputs = topics } }

// AuditTopic sets the topic audit records go to, transactionally with the
// consumed offsets (exactly once). The default "" writes no topic: the
// auditor then consumes with a plain group consumer and commits after
// writing to the stdout writer, so that output is at least once.
func AuditTopic(t string) AuditOpt { return func(c *auditCfg) { c.auditTopic = t } }

// AuditGroup sets the consumer group, overriding the default
// "flakestream-audit". A new group starts at the earliest offset.
func AuditGroup(g string) AuditOpt { return func(c *auditCfg) { c.group = g } }

// AuditInstanceID names this instance, overriding the default host name;
// the transactional ID "flakestream-<group>-<instance id>" is derived from
// it, so a restarted instance fences its predecessor's open transaction.
func AuditInstanceID(id string) AuditOpt { return func(c *auditCfg) { c.instanceID = id } }

// AuditTransactionalID sets the transactional ID outright, overriding the
// one derived from the instance ID.
func AuditTransactionalID(id string) AuditOpt { return func(c *auditCfg) { c.txnID = id } }

// AuditLayout sets the layout numbers are decoded with, overriding
// idgen.DefaultLayout(). An invalid layout is ErrBadConfig.
func AuditLayout(l idgen.Layout) AuditOpt { return func(c *auditCfg) { c.layout = l } }

// AuditNumberField sets the JSON field read when a record has no
// flakestream-number header, overriding codec.DefaultField ("order_no").
func AuditNumberField(name string) AuditOpt { return func(c *auditCfg) { c.field = name } }

// AuditDupWindow sets how long, in number time, a number is remembered to
// flag it "duplicate" when it comes again, overriding the default 10m.
// 1s to 168h; memory is bounded by AuditDupMaxEntries whatever the window.
func AuditDupWindow(d time.Duration) AuditOpt { return func(c *auditCfg) { c.dupWindow = d } }

// AuditDupMaxEntries bounds the numbers the dup window holds, overriding
// the default 10,000,000 (at most about 10.7 bytes each). Past it the
// oldest bucket of the window (about a second by default) is dropped, and
// flakestream_audit_dup_evictions_total counts it: the window is then
// effectively shorter than configured.
func AuditDupMaxEntries(n int) AuditOpt { return func(c *auditCfg) { c.dupMaxEntries = n } }

// AuditMaxSkew sets how far a number's time may be ahead of the auditor's
// clock before it is flagged "future", overriding the default 5s.
func AuditMaxSkew(d time.Duration) AuditOpt { return func(c *auditCfg) { c.maxSkew = d } }

// AuditMaxLag sets how far apart a record's timestamp and its number's time
// may be before it is flagged "lag", overriding the default 5m; 0 turns
// the check off.
func AuditMaxLag(d time.Duration) AuditOpt { return func(c *auditCfg) { c.maxLag = d } }

// AuditAllowedServers sets the server IDs that are expected; any other is
// flagged "unknown_server". The default (none given) allows every ID. An
// ID outside the layout's server field is ErrBadConfig.
func AuditAllowedServers(ids ...int64) AuditOpt {
	return func(c *auditCfg) { c.servers = idSetOf(ids) }
}

// AuditAllowedWorkers is AuditAllowedServers for worker IDs
// ("unknown_worker").
func AuditAllowedWorkers(ids ...int64) AuditOpt {
	return func(c *auditCfg) { c.workers = idSetOf(ids) }
}

func idSetOf(ids []int64) map[int64]struct{} {
	if ids == nil {
		return nil
	}
	m := make(map[int64]struct{}, len(ids))
	for _, id := range ids {
		m[id] = struct{}{}
	}
	return m
}

// AuditStdout makes the auditor write every audit record as a JSON line to
// w (nil, the default, writes none). With an audit topic the lines are
// written after the transaction commits; without one, before the offsets
// are committed.
func AuditStdout(w io.Writer) AuditOpt { return func(c *auditCfg) { c.stdout = w } }

// AuditRecent sets how many of the latest audit records (and of the latest
// with anomalies) the live page shows, overriding the default 50.
func AuditRecent(n int) AuditOpt { return func(c *auditCfg) { c.recent = n } }

// AuditCatchUp turns the catch-up on assignment on or off (default on):
// before auditing a partition it was just given, the auditor reads, without
// auditing them, the records of the last dup window before the first one it
// will audit, so that a restart or a rebalance neither forgets the numbers
// that a duplicate would repeat nor the number a "backwards" compares with.
// timeout bounds one catch-up, overriding the default 1m.
func AuditCatchUp(on bool, timeout time.Duration) AuditOpt {
	return func(c *auditCfg) {
		c.catchUp = on
		if timeout > 0 {
			c.catchUpTimeout = timeout
		}
	}
}

// AuditCreateTopic makes the auditor create a missing audit topic with as
// many partitions as the first input topic, instead of refusing to start.
func AuditCreateTopic() AuditOpt { return func(c *auditCfg) { c.createTopic = true } }

// AuditMaxPollRecords bounds the records of one transaction, overriding
// the default 10,000.
func AuditMaxPollRecords(n int) AuditOpt { return func(c *auditCfg) { c.maxPollRecords = n } }

// AuditTransactionTimeout sets the transaction timeout, overriding the
// default 10s.
func AuditTransactionTimeout(d time.Duration) AuditOpt {
	return func(c *auditCfg) { c.txnTimeout = d }
}

// AuditSessionTimeout sets the group session timeout, overriding the
// default 10s.
func AuditSessionTimeout(d time.Duration) AuditOpt {
	return func(c *auditCfg) { c.sessionTimeout = d }
}

// AuditShutdownTimeout bounds the shutdown after ctx ends, overriding the
// default 15s.
func AuditShutdownTimeout(d time.Duration) AuditOpt {
	return func(c *auditCfg) { c.shutdownTimeout = d }
}

// AuditBackoff sets the retry backoff after a failed batch, overriding the
// default 100ms doubling to 5s.
func AuditBackoff(min, max time.Duration) AuditOpt {
	return func(c *auditCfg) { c.backoffMin, c.backoffMax = min, max }
}

// AuditClock replaces the clock that "future" and the live page's rates
// are judged by, overriding time.Now (for tests).
func AuditClock(now func() time.Time) AuditOpt { return func(c *auditCfg) { c.now = now } }

// AuditLogger sets the logger, overriding the default that discards.
func AuditLogger(l *slog.Logger) AuditOpt { return func(c *auditCfg) { c.logger = l } }

// AuditRegisterer sets where the auditor registers its metrics; nil (the
// default) registers them nowhere.
func AuditRegisterer(r prometheus.Registerer) AuditOpt {
	return func(c *auditCfg) { c.registerer = r }
}

// AuditKafkaOpts adds franz-go options (TLS, SASL, tuning), applied after
// the auditor's own.
func AuditKafkaOpts(opts ...kgo.Opt) AuditOpt {
	return func(c *auditCfg) { c.kafkaOpts = append(c.kafkaOpts, opts...) }
}

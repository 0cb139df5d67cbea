package audit

import (
	"fmt"
	"io"
	"time"

	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/eos"
	"github.com/flakestream/flakestream/idgen"
	"github.com/flakestream/flakestream/pipeline"
)

// Opt configures an Auditor.
type Opt func(*cfg)

type cfg struct {
	eos            eos.Config
	auditTopic     string
	layout         idgen.Layout
	field          string
	format         codec.Format
	key            *pipeline.KeySpec
	dupWindow      time.Duration
	dupMaxEntries  int
	maxSkew        time.Duration
	maxLag         time.Duration
	servers        map[int64]struct{}
	workers        map[int64]struct{}
	stdout         io.Writer
	recent         int
	catchUp        bool
	catchUpTimeout time.Duration
	createTopic    bool
	now            func() time.Time
}

// Audit defaults.
const (
	// DefaultGroup is the audit consumer's group.
	DefaultGroup = "flakestream-audit"
	// DefaultDupWindow is how long a number is remembered, by number time.
	DefaultDupWindow = 10 * time.Minute
	// DefaultDupMaxEntries bounds the numbers the dup window holds.
	DefaultDupMaxEntries = 10_000_000
	// DefaultMaxSkew is how far ahead of the clock a number may be.
	DefaultMaxSkew = 5 * time.Second
	// DefaultMaxLag is how far apart a record's timestamp and its number's
	// time may be.
	DefaultMaxLag = 5 * time.Minute
	// DefaultCatchUpTimeout bounds the reading back of the last duplicate
	// window of a partition this instance is given.
	DefaultCatchUpTimeout = time.Minute
)

func defaultCfg(s eos.Config) cfg {
	if s.Group == "" {
		s.Group = DefaultGroup
	}
	return cfg{
		eos:            func() eos.Config { s.Name, s.MetricsNamespace = "audit", "flakestream_audit"; return s }(),
		layout:         idgen.DefaultLayout(),
		field:          codec.DefaultField,
		dupWindow:      DefaultDupWindow,
		dupMaxEntries:  DefaultDupMaxEntries,
		maxSkew:        DefaultMaxSkew,
		maxLag:         DefaultMaxLag,
		recent:         50,
		catchUp:        true,
		catchUpTimeout: DefaultCatchUpTimeout,
		now:            time.Now,
	}
}

func (c *cfg) validate() error {
	e := &c.eos
	e.Mode = eos.Transactional
	if c.auditTopic == "" {
		e.Mode = eos.AtLeastOnce
	}
	if err := e.CheckNotInput(c.auditTopic); err != nil {
		return err
	}
	if err := e.Validate(); err != nil {
		return err
	}
	if err := c.layout.Validate(); err != nil {
		return fmt.Errorf("%w: layout: %w", eos.ErrBadConfig, err)
	}
	if c.field == "" {
		return fmt.Errorf("%w: empty number field name", eos.ErrBadConfig)
	}
	if c.dupWindow < time.Second || c.dupWindow > 7*24*time.Hour {
		return fmt.Errorf("%w: dup window %s: want 1s to 168h", eos.ErrBadConfig, c.dupWindow)
	}
	if c.dupMaxEntries < 1 {
		return fmt.Errorf("%w: dup max entries %d: want at least 1", eos.ErrBadConfig, c.dupMaxEntries)
	}
	if c.maxSkew < 0 || c.maxLag < 0 {
		return fmt.Errorf("%w: max skew %s, max lag %s: want 0 or more", eos.ErrBadConfig, c.maxSkew, c.maxLag)
	}
	for id := range c.servers {
		if err := c.layout.CheckServer(id); err != nil {
			return fmt.Errorf("%w: allowed servers: %w", eos.ErrBadConfig, err)
		}
	}
	for id := range c.workers {
		if err := c.layout.CheckWorker(id); err != nil {
			return fmt.Errorf("%w: allowed workers: %w", eos.ErrBadConfig, err)
		}
	}
	if c.recent < 1 {
		return fmt.Errorf("%w: recent records %d: want at least 1", eos.ErrBadConfig, c.recent)
	}
	if c.now == nil {
		c.now = time.Now
	}
	return nil
}

// Topic sets the topic audit records go to, transactionally with the
// consumed offsets (exactly once). The default "" writes no topic: the
// auditor then consumes with a plain group consumer and commits after
// writing to the stdout writer, so that output is at least once.
func Topic(t string) Opt { return func(c *cfg) { c.auditTopic = t } }

// Layout sets the layout numbers are decoded with, overriding
// idgen.DefaultLayout(). An invalid layout is eos.ErrBadConfig.
func Layout(l idgen.Layout) Opt { return func(c *cfg) { c.layout = l } }

// NumberField sets the JSON field read when a record has no
// flakestream-number header, overriding codec.DefaultField ("order_no").
func NumberField(name string) Opt { return func(c *cfg) { c.field = name } }

// Format sets the value format the number is read from when a record has
// no flakestream-number header, overriding JSON (the NumberField of the
// JSON value). A *schema.Format reads it from the Avro or Protobuf value
// through the registry: a registry outage (codec.ErrUnavailable) aborts
// the batch, which is retried; a value it cannot read is audited as
// invalid.
func Format(f codec.Format) Opt { return func(c *cfg) { c.format = f } }

// Key makes the audit read every record's order key as the worker's
// idempotency key does (pipeline.ParseKeySpec: the record key, a
// top-level field of the value through the Format, or a header): an order
// key seen again with another number within the dup window is flagged
// "renumbered", as an order's source is without it. Off by default. A
// registry outage while reading a field aborts the batch, which is
// retried; a record without the key is checked by its source only.
func Key(k pipeline.KeySpec) Opt { return func(c *cfg) { c.key = &k } }

// DupWindow sets how long, in number time, a number is remembered to
// flag it "duplicate" when it comes again, and an order's first copy to
// flag it "renumbered", overriding the default 10m. 1s to 168h; memory is
// bounded by DupMaxEntries whatever the window.
func DupWindow(d time.Duration) Opt { return func(c *cfg) { c.dupWindow = d } }

// DupMaxEntries bounds the numbers the dup window holds, overriding
// the default 10,000,000 (at most about 10.7 bytes each), and, separately,
// the orders the order window holds (one entry per source, and one per key
// with Key; see docs/renumbered.md for their bytes). Past it the oldest
// bucket of the window (about a second by default) is dropped, and
// flakestream_audit_dup_evictions_total (flakestream_audit_order_evictions_total)
// counts it: the window is then effectively shorter than configured.
func DupMaxEntries(n int) Opt { return func(c *cfg) { c.dupMaxEntries = n } }

// MaxSkew sets how far a number's time may be ahead of the auditor's
// clock before it is flagged "future", overriding the default 5s.
func MaxSkew(d time.Duration) Opt { return func(c *cfg) { c.maxSkew = d } }

// MaxLag sets how far apart a record's timestamp and its number's time
// may be before it is flagged "lag", overriding the default 5m; 0 turns
// the check off.
func MaxLag(d time.Duration) Opt { return func(c *cfg) { c.maxLag = d } }

// AllowedServers sets the server IDs that are expected; any other is
// flagged "unknown_server". The default (none given) allows every ID. An
// ID outside the layout's server field is eos.ErrBadConfig.
func AllowedServers(ids ...int64) Opt {
	return func(c *cfg) { c.servers = idSetOf(ids) }
}

// AllowedWorkers is AllowedServers for worker IDs
// ("unknown_worker").
func AllowedWorkers(ids ...int64) Opt {
	return func(c *cfg) { c.workers = idSetOf(ids) }
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

// Stdout makes the auditor write every audit record as a JSON line to
// w (nil, the default, writes none). With an audit topic the lines are
// written after the transaction commits; without one, before the offsets
// are committed.
func Stdout(w io.Writer) Opt { return func(c *cfg) { c.stdout = w } }

// Recent sets how many of the latest audit records (and of the latest
// with anomalies) the live page shows, overriding the default 50.
func Recent(n int) Opt { return func(c *cfg) { c.recent = n } }

// CatchUp turns the catch-up on assignment on or off (default on):
// before auditing a partition it was just given, the auditor reads, without
// auditing them, the records of the last dup window before the first one it
// will audit, so that a restart or a rebalance neither forgets the numbers
// that a duplicate would repeat nor the number a "backwards" compares with.
// timeout bounds one catch-up, overriding the default 1m.
func CatchUp(on bool, timeout time.Duration) Opt {
	return func(c *cfg) {
		c.catchUp = on
		if timeout > 0 {
			c.catchUpTimeout = timeout
		}
	}
}

// CreateTopic makes the auditor create a missing audit topic with as
// many partitions as the first input topic, instead of refusing to start.
func CreateTopic() Opt { return func(c *cfg) { c.createTopic = true } }

// Clock replaces the clock that "future" and the live page's rates
// are judged by, overriding time.Now (for tests).
func Clock(now func() time.Time) Opt { return func(c *cfg) { c.now = now } }

package audit

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/eos"
	"github.com/flakestream/flakestream/pipeline"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Auditor is the audit side consumer. It reads the numbered topics
// read_committed in its own group, decodes every record's number into a
// codec.AuditRecord, flags anomalies (see AnomalyKinds), and writes the
// records to the audit topic, to a stdout writer, or both. It also keeps the
// metrics and the live page's state (see Handlers).
//
// With an audit topic, output is exactly once: the auditor is a franz-go
// GroupTransactSession, like the Worker, and each batch's audit records and
// consumed offsets commit in one transaction. Without one it is a plain
// group consumer that commits after writing: at least once.
type Auditor struct {
	cfg  cfg
	log  *slog.Logger
	det  *detector // owned by the Run goroutine
	m    *auditMetrics
	live *liveState
	loop *eos.Loop
	b    auditBatch               // the open batch
	nums map[*kgo.Record]valueNum // the open batch's numbers read from values (Format)
	keys map[*kgo.Record][]byte   // the open batch's order keys (Key), nil for none

	auditParts int32
	out        *bufio.Writer

	mu    sync.Mutex
	fresh map[partKey]bool // partitions assigned since their last batch
	stats Stats
}

// Stats are an auditor's counts of committed work.
type Stats struct {
	// Audited counts the audit records written (committed).
	Audited int64
	// Clean counts the audited records without any anomaly.
	Clean int64
	// Anomalies counts flagged records by anomaly; every kind is present.
	Anomalies map[string]int64
	// Committed and Aborted count transactions (batches without a topic).
	Committed, Aborted int64
	// CaughtUp counts records read, without auditing them, to catch up on
	// newly assigned partitions.
	CaughtUp int64
	// DupEntries is the numbers the dup window holds now; DupEvictions the
	// buckets evicted to stay within its bound; Unchecked the numbers too
	// old (or too far ahead) for the window to check.
	DupEntries   int
	DupEvictions uint64
	Unchecked    uint64
	// OrderEntries is the orders (sources and keys) the order window holds
	// now; OrderEvictions the buckets evicted to stay within its bound.
	OrderEntries   int
	OrderEvictions uint64
}

// New validates the loop's settings s (Brokers and Topics are required;
// Group defaults to DefaultGroup) and the auditor's options, and returns an
// auditor. It does not connect; Run does.
func New(s eos.Config, opts ...Opt) (*Auditor, error) {
	c := defaultCfg(s)
	if err := eos.Configure(&c, opts, c.validate); err != nil {
		return nil, err
	}
	a := &Auditor{cfg: c, log: c.eos.Logger, fresh: map[partKey]bool{}}
	a.det = newDetector(detectorConfig{
		layout: c.layout, field: c.field, window: c.dupWindow, maxEntries: c.dupMaxEntries,
		maxSkew: c.maxSkew, maxLag: c.maxLag, servers: c.servers, workers: c.workers,
		skipRedelivered: c.auditTopic == "", now: c.now,
	})
	if c.format != nil && c.format.Name() != codec.ValueJSON {
		a.det.cfg.valueNumber = a.valueNumber
	}
	if c.key != nil {
		if a.cfg.format == nil {
			a.cfg.format = codec.JSONFormat{}
		}
		a.det.cfg.keyOf = a.keyOf
	}
	a.m = newAuditMetrics(c.eos.Registerer, c.layout)
	a.live = newLiveState(&a.cfg, a.m)
	a.stats.Anomalies = map[string]int64{}
	for _, k := range anomalyKinds {
		a.stats.Anomalies[k] = 0
	}
	if c.stdout != nil {
		a.out = bufio.NewWriterSize(c.stdout, 64<<10)
	}
	var err error
	a.loop, err = eos.New(c.eos, a, eos.Metrics{Lag: a.m.lag, Transactions: a.m.txns})
	return a, err
}

// Stats returns the auditor's counts of committed work.
func (a *Auditor) Stats() Stats {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.stats
	s.Committed, s.Aborted = a.loop.Counts()
	s.Anomalies = make(map[string]int64, len(a.stats.Anomalies))
	for k, v := range a.stats.Anomalies {
		s.Anomalies[k] = v
	}
	return s
}

// Ready reports nil once the auditor has joined its group and its last
// batch did not fail, or why not.
func (a *Auditor) Ready() error { return a.loop.Ready() }

// TransactionalID returns the auditor's transactional ID ("" without an
// audit topic, when it does not produce).
func (a *Auditor) TransactionalID() string {
	if a.cfg.auditTopic == "" {
		return ""
	}
	return a.cfg.eos.TransactionalID
}

// Run audits until ctx ends or a fatal error. A batch that fails for a
// passing reason is aborted and retried with backoff; a fatal one (not
// authorized, the audit topic missing, stdout closed) ends Run with an
// error wrapping eos.ErrFatal or eos.ErrMissingTopic. After ctx ends, Run finishes
// or aborts the open transaction and leaves the group within the shutdown
// timeout.
func (a *Auditor) Run(ctx context.Context) error { return a.loop.Run(ctx) }

// Assigned implements eos.Assigner: it marks partitions to catch up on
// before their first batch.
func (a *Auditor) Assigned(_ context.Context, _ *kgo.Client, parts map[string][]int32) {
	a.mu.Lock()
	for t, ps := range parts {
		for _, p := range ps {
			a.fresh[partKey{t, p}] = true
		}
	}
	a.mu.Unlock()
}

// Start implements eos.Step: it finds the audit topic's partition count,
// creating the topic if allowed.
func (a *Auditor) Start(ctx context.Context, s *eos.Session) (map[string][]int32, error) {
	c := &a.cfg
	var outputs []string
	if c.auditTopic != "" {
		outputs = append(outputs, c.auditTopic)
	}
	topics, err := s.CheckTopics(ctx, c.createTopic, outputs...)
	if err != nil {
		return nil, err
	}
	a.log.Info("audit started", "inputs", c.eos.Topics, "audit_topic", c.auditTopic, "group", c.eos.Group,
		"transactional_id", a.TransactionalID(), "layout", c.layout.String(), "dup_window", c.dupWindow,
		"dup_max_entries", c.dupMaxEntries, "stdout", a.out != nil)
	if c.auditTopic == "" {
		a.log.Info("no audit topic: audit records are written at least once (a crash between writing and committing offsets writes them again)")
		return nil, nil
	}
	a.auditParts = topics.Partitions[c.auditTopic]
	if maxIn := max(topics.MaxIn, 1); a.auditParts < maxIn || len(c.eos.Topics) > 1 {
		a.log.Warn("several numbered partitions share an audit partition (partition p goes to audit partition p mod "+strconv.Itoa(int(a.auditParts))+"): each one's audit records stay in order, interleaved",
			"input_partitions", maxIn, "audit_partitions", a.auditParts)
	}
	return topics.Produce(), nil
}

// Process implements eos.Step: it audits one batch against the detector's
// committed state. With an audit topic the records go into the open
// transaction, and only once it commits does the detector keep what the
// batch taught it (Committed); without one (tx nil) the lines are written
// here, before the loop commits the offsets.
func (a *Auditor) Process(ctx context.Context, tx *eos.Tx, fetches kgo.Fetches) error {
	b := &a.b
	b.reset(fetches)
	if err := a.readValueNumbers(ctx, b.in); err != nil {
		return err
	}
	if err := a.readKeys(ctx, b.in); err != nil {
		return err
	}
	if a.cfg.catchUp {
		a.catchUp(ctx, b.in)
	}
	a.det.begin()
	b.build(a.det, a.cfg.auditTopic, a.auditParts)
	if tx == nil {
		return a.writeLines(b)
	}
	for _, r := range b.out {
		tx.Produce(ctx, r)
	}
	return nil
}

// Aborted implements eos.Step: the detector forgets the batch.
func (a *Auditor) Aborted() { a.det.abort() }

// Committed implements eos.Step: the detector keeps the batch, and the
// stats, metrics, live page and (with a topic) the stdout lines take it in.
// A failed commit of the offsets after it (at least once, without a topic)
// is not retried: the records were written, and this instance skips them
// if they come back.
func (a *Auditor) Committed() error {
	b := &a.b
	a.det.commit()
	a.mu.Lock()
	a.stats.Audited += int64(len(b.recs))
	for i := range b.recs {
		if b.sets[i] == 0 {
			a.stats.Clean++
		}
		for _, k := range b.recs[i].Anomalies {
			a.stats.Anomalies[k]++
		}
	}
	a.stats.DupEntries = a.det.dups.entries
	a.stats.DupEvictions = a.det.dups.evictions
	a.stats.Unchecked = a.det.unchecked
	a.stats.OrderEntries = a.det.orders.entries
	a.stats.OrderEvictions = a.det.orders.evictions
	a.mu.Unlock()
	a.m.committed(b, a.det)
	a.live.add(b, a.cfg.now())
	if a.cfg.auditTopic != "" {
		return a.writeLines(b)
	}
	return nil
}

// writeLines writes the batch's audit records as JSON lines, if asked to.
// A writer that fails (stdout closed) is fatal: the output asked for can
// no longer be given.
func (a *Auditor) writeLines(b *auditBatch) error {
	if a.out == nil {
		return nil
	}
	for _, v := range b.values {
		_, _ = a.out.Write(v)
		_ = a.out.WriteByte('\n')
	}
	if err := a.out.Flush(); err != nil {
		return fmt.Errorf("%w: write audit records to stdout: %w", eos.ErrFatal, err)
	}
	return nil
}

// valueNum is the number read from a record's value by the Format.
type valueNum struct {
	n  int64
	ok bool
}

// readValueNumbers reads, through the Format, the number of every record
// of the batch that has no number header, before the detector sees any:
// a registry outage fails the batch here (it is aborted and retried), and
// the detector, which cannot fail, finds the numbers in a.nums. A value
// the Format cannot read has no number (audited as invalid). For JSON it
// does nothing: the detector reads the field itself.
func (a *Auditor) readValueNumbers(ctx context.Context, recs []*kgo.Record) error {
	if a.det.cfg.valueNumber == nil {
		return nil
	}
	if a.nums == nil {
		a.nums = make(map[*kgo.Record]valueNum)
	}
	clear(a.nums)
	for _, r := range recs {
		if _, ok := numberHeader(r); ok {
			continue
		}
		n, ok, err := a.cfg.format.Number(ctx, r.Value)
		var bad *codec.InputError
		if err != nil && !errors.As(err, &bad) {
			if errors.Is(err, codec.ErrUnavailable) || ctx.Err() != nil {
				return fmt.Errorf("audit: read the number from the value of %s[%d]@%d: %w", r.Topic, r.Partition, r.Offset, err)
			}
			return fmt.Errorf("%w: audit: read the number from the value of %s[%d]@%d: %w", eos.ErrFatal, r.Topic, r.Partition, r.Offset, err)
		}
		a.nums[r] = valueNum{n, ok && err == nil}
	}
	return nil
}

// valueNumber is the detector's valueNumber: the number readValueNumbers
// read, or, for a record outside the batch (the catch-up's), one read now;
// there a registry failure counts as no number, which only weakens the
// duplicate check of the records read back.
func (a *Auditor) valueNumber(r *kgo.Record) (int64, bool) {
	if v, ok := a.nums[r]; ok {
		return v.n, v.ok
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, ok, err := a.cfg.format.Number(ctx, r.Value)
	return n, ok && err == nil
}

// readKeys reads the order key (Key) of every record of the batch before
// the detector sees any, as readValueNumbers does the numbers: a registry
// outage fails the batch here, to be retried. A record without a usable
// key has none (nil), and is checked by its source only.
func (a *Auditor) readKeys(ctx context.Context, recs []*kgo.Record) error {
	if a.cfg.key == nil {
		return nil
	}
	if a.keys == nil {
		a.keys = make(map[*kgo.Record][]byte)
	}
	clear(a.keys)
	for _, r := range recs {
		k, err := a.cfg.key.Key(ctx, a.cfg.format, r)
		var kf *pipeline.KeyFailedError
		if errors.As(err, &kf) {
			if errors.Is(err, codec.ErrUnavailable) || ctx.Err() != nil {
				return fmt.Errorf("audit: read the order key of %s[%d]@%d: %w", r.Topic, r.Partition, r.Offset, err)
			}
			return fmt.Errorf("%w: audit: read the order key of %s[%d]@%d: %w", eos.ErrFatal, r.Topic, r.Partition, r.Offset, err)
		}
		a.keys[r] = k // nil when the record has none
	}
	return nil
}

// keyOf is the detector's keyOf: the key readKeys read, or, for a record
// outside the batch (the catch-up's), one read now, where any failure
// counts as no key.
func (a *Auditor) keyOf(r *kgo.Record) ([]byte, bool) {
	if k, ok := a.keys[r]; ok {
		return k, k != nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	k, err := a.cfg.key.Key(ctx, a.cfg.format, r)
	return k, err == nil
}

package audit

import (
	"time"
	"unicode/utf8"

	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/idgen"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The anomalies an audit record can list, by their exact names. A record
// lists them in the order of [AnomalyKinds].
const (
	// AnomalyDuplicate: the number was seen before within the dup window.
	AnomalyDuplicate = codec.AnomalyDuplicate
	// AnomalyRenumbered: the record's order (its source, or with Key its
	// order key) was seen before, within the dup window, with another
	// number. The audit record's FirstCopy names the first copy.
	AnomalyRenumbered = codec.AnomalyRenumbered
	// AnomalyBackwards: the number is smaller than the previous number in
	// the same partition.
	AnomalyBackwards = "backwards"
	// AnomalyUnknownServer: the server ID is not an allowed one.
	AnomalyUnknownServer = "unknown_server"
	// AnomalyUnknownWorker: the worker ID is not an allowed one.
	AnomalyUnknownWorker = "unknown_worker"
	// AnomalyFuture: the number's time is ahead of the audit consumer's
	// clock by more than the allowed skew.
	AnomalyFuture = "future"
	// AnomalyLag: the record's timestamp and the number's time are further
	// apart than the allowed lag.
	AnomalyLag = "lag"
	// AnomalyInvalid: the record has no number, or one that does not decode.
	// It is the only anomaly of such a record.
	AnomalyInvalid = codec.AnomalyInvalid
)

var anomalyKinds = [...]string{AnomalyDuplicate, AnomalyRenumbered, AnomalyBackwards, AnomalyUnknownServer,
	AnomalyUnknownWorker, AnomalyFuture, AnomalyLag, AnomalyInvalid}

// AnomalyKinds returns every anomaly name, in the order records list them.
func AnomalyKinds() []string { return append([]string(nil), anomalyKinds[:]...) }

// anomalies is a set of anomalies: bit i is anomalyKinds[i].
type anomalies uint8

const (
	anDuplicate anomalies = 1 << iota
	anRenumbered
	anBackwards
	anUnknownServer
	anUnknownWorker
	anFuture
	anLag
	anInvalid
)

// anomalyLists holds the name list of every set, built once, so that an
// audit record's Anomalies costs no allocation. The lists are shared: never
// modify one.
var anomalyLists = func() (l [1 << len(anomalyKinds)][]string) {
	for set := range l {
		for i, k := range anomalyKinds {
			if set&(1<<i) != 0 {
				l[set] = append(l[set], k)
			}
		}
	}
	return l
}()

func (a anomalies) names() []string { return anomalyLists[a] }

// partKey names a partition of a numbered topic.
type partKey struct {
	topic     string
	partition int32
}

// lastSeen is what a partition's last audited record left behind: its offset
// and, if it had one, its number.
type lastSeen struct {
	offset int64
	id     int64
	hasID  bool
}

// detectorConfig is what the detector checks against.
type detectorConfig struct {
	layout           idgen.Layout
	field            string
	window           time.Duration
	maxEntries       int
	maxSkew, maxLag  time.Duration      // maxLag 0: no lag check
	servers, workers map[int64]struct{} // nil: any ID is allowed
	skipRedelivered  bool               // at-least-once: skip records this instance already wrote
	// valueNumber, if set, reads the number of a record without a number
	// header from its value, instead of the JSON field.
	valueNumber func(r *kgo.Record) (int64, bool)
	// keyOf, if set, reads a record's order key (--key): the same key with
	// another number is renumbered too.
	keyOf func(r *kgo.Record) ([]byte, bool)
	now   func() time.Time
}

// detector decodes numbers and flags anomalies. Its state (the dup window,
// the last number of each partition) must describe exactly the records whose
// audit records were committed, or a transaction that aborts would leave
// behind numbers that its own records, read again, would then collide with.
// So a batch is staged: begin, audit each record against the committed
// state plus what the batch itself staged, then commit (apply the stage) or
// abort (drop it). A detector is used by one goroutine.
type detector struct {
	cfg    detectorConfig
	dups   *dupWindow
	orders *orderWindow
	last   map[partKey]lastSeen

	// The open batch.
	nowMs           int64
	limit           int64 // newest bucket the clock allows
	wm              int64 // watermark with the batch's numbers
	staged          map[int64]struct{}
	order           []int64
	lastStaged      map[partKey]lastSeen
	uncheckedStaged uint64
	owm             int64         // the order window's watermark with the batch's orders
	ordersStaged    []stagedOrder // staged in the order window's map, in order

	// unchecked counts the committed numbers the dup check had to skip:
	// older than the window behind the newest number, or beyond the clock's
	// limit.
	unchecked uint64
}

func newDetector(c detectorConfig) *detector {
	if c.now == nil {
		c.now = time.Now
	}
	return &detector{
		cfg:        c,
		dups:       newDupWindow(c.layout, c.window, c.maxEntries),
		orders:     newOrderWindow(c.layout, c.window, c.maxEntries),
		last:       make(map[partKey]lastSeen),
		staged:     make(map[int64]struct{}),
		lastStaged: make(map[partKey]lastSeen),
	}
}

// begin opens a batch; records are judged against the clock read here.
func (d *detector) begin() {
	d.abort()
	d.nowMs = d.cfg.now().UnixMilli()
	d.limit = d.limitBucket(d.nowMs)
	d.wm = d.dups.watermark
	d.owm = d.orders.watermark
}

// limitBucket is the newest dup-window bucket a number may be in at Unix
// millisecond now: the clock plus the allowed skew.
func (d *detector) limitBucket(now int64) int64 {
	ms := now + d.cfg.maxSkew.Milliseconds() - d.cfg.layout.EpochMs()
	if ms < 0 {
		return -1
	}
	return ms >> d.dups.shift
}

// abort drops the open batch.
func (d *detector) abort() {
	clear(d.staged)
	clear(d.lastStaged)
	for _, s := range d.ordersStaged {
		d.orders.unstage(s.hash)
	}
	d.ordersStaged = d.ordersStaged[:0]
	d.order = d.order[:0]
	d.uncheckedStaged = 0
}

// commit applies the open batch: the state now includes its records.
func (d *detector) commit() {
	for _, id := range d.order {
		d.dups.add(id, d.limit)
	}
	for _, s := range d.ordersStaged {
		d.orders.commitStaged(s.hash, s.id, d.limit)
	}
	d.ordersStaged = d.ordersStaged[:0]
	for k, v := range d.lastStaged {
		d.last[k] = v
	}
	d.unchecked += d.uncheckedStaged
	d.abort()
}

func (d *detector) lastOf(k partKey) (lastSeen, bool) {
	if v, ok := d.lastStaged[k]; ok {
		return v, true
	}
	v, ok := d.last[k]
	return v, ok
}

// audit builds the audit record of r within the open batch. skip is true
// for a record this instance already wrote (at-least-once mode only), which
// must not be written or judged again.
func (d *detector) audit(r *kgo.Record) (rec codec.AuditRecord, set anomalies, skip bool) {
	k := partKey{r.Topic, r.Partition}
	prev, hasPrev := d.lastOf(k)
	if d.cfg.skipRedelivered && hasPrev && r.Offset <= prev.offset {
		return rec, 0, true
	}
	rec = codec.AuditRecord{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset,
		RecordUnixMs: r.Timestamp.UnixMilli(), Source: sourceOf(r)}
	id, ok := d.numberOf(r)
	if !ok {
		// The partition's last number stays: "backwards" compares numbers.
		d.lastStaged[k] = lastSeen{offset: r.Offset, id: prev.id, hasID: prev.hasID}
		rec.Anomalies = anInvalid.names()
		return rec, anInvalid, false
	}
	p, _ := d.cfg.layout.Decompose(id) // every non-negative int64 decodes
	rec.Decoded = codec.Decoded{ID: id, UnixMs: p.UnixMs, ElapsedMs: p.ElapsedMs, Server: p.Server,
		Worker: p.Worker, Sequence: p.Sequence, Valid: true}
	rec.LagMs = rec.RecordUnixMs - p.UnixMs

	if b := d.dups.bucketOf(id); d.dups.checkable(b, d.wm, d.limit) {
		if _, again := d.staged[id]; again || d.dups.contains(id) {
			set |= anDuplicate
		} else {
			d.staged[id] = struct{}{}
			d.order = append(d.order, id)
		}
		d.wm = max(d.wm, b)
	} else {
		d.uncheckedStaged++
	}
	if first, ok := d.renumbered(r, rec.Source, id); ok {
		set |= anRenumbered
		rec.FirstCopy = &codec.Copy{Topic: first.topic, Partition: first.partition, Offset: first.offset, ID: first.id}
	}
	if hasPrev && prev.hasID && id < prev.id {
		set |= anBackwards
	}
	if _, ok := d.cfg.servers[p.Server]; d.cfg.servers != nil && !ok {
		set |= anUnknownServer
	}
	if _, ok := d.cfg.workers[p.Worker]; d.cfg.workers != nil && !ok {
		set |= anUnknownWorker
	}
	if p.UnixMs-d.nowMs > d.cfg.maxSkew.Milliseconds() {
		set |= anFuture
	}
	if lag := d.cfg.maxLag.Milliseconds(); lag > 0 && (rec.LagMs > lag || rec.LagMs < -lag) {
		set |= anLag
	}
	d.lastStaged[k] = lastSeen{offset: r.Offset, id: id, hasID: true}
	rec.Anomalies = set.names()
	return rec, set, false
}

// stagedOrder is an order the open batch staged in the order window.
type stagedOrder struct {
	hash uint64
	id   int64
}

// firstCopy is where an order's first copy is, and its number.
type firstCopy struct {
	topic     string
	partition int32
	offset    int64
	id        int64
}

// renumbered looks up the order of r, numbered id, by its source (src, if
// well formed) and by its key (if configured): it returns the first copy
// of the first of them seen before with another number. An order not seen
// before is staged, by each of its names, with r as its first copy.
func (d *detector) renumbered(r *kgo.Record, src string, id int64) (firstCopy, bool) {
	var names [2]orderName
	n := 0
	if src != "" {
		names[n] = d.orders.sourceName(src)
		n++
	}
	if d.cfg.keyOf != nil {
		if key, ok := d.cfg.keyOf(r); ok {
			names[n] = d.orders.keyName(key)
			n++
		}
	}
	var found firstCopy
	var renumbered bool
	b := d.orders.bucketOf(id)
	for _, name := range names[:n] {
		// Staged orders of this batch are in the map too.
		e, seen, taken := d.orders.lookup(name)
		switch {
		case seen && e.id != id && !renumbered:
			p := d.orders.parts[e.part]
			found, renumbered = firstCopy{p.topic, p.partition, e.offset, e.id}, true
		case seen:
			// The same number again is the dup window's business; a
			// renumbered copy is not a first copy.
		case taken:
			// Another name with the same 64-bit hash holds the slot:
			// this one goes unchecked (about entries/2^64 per record).
		case d.orders.checkable(b, d.owm, d.limit):
			d.orders.stage(name, orderEntry{id: id, offset: r.Offset, part: d.orders.part(partKey{r.Topic, r.Partition})})
			d.ordersStaged = append(d.ordersStaged, stagedOrder{name.hash, id})
			d.owm = max(d.owm, b)
		}
	}
	return found, renumbered
}

// observeOrder adds the order of a record read by the catch-up.
func (d *detector) observeOrder(r *kgo.Record, id, limit int64) {
	e := orderEntry{id: id, offset: r.Offset, part: d.orders.part(partKey{r.Topic, r.Partition})}
	if src := sourceOf(r); src != "" {
		d.orders.add(d.orders.sourceName(src), e, limit)
	}
	if d.cfg.keyOf != nil {
		if key, ok := d.cfg.keyOf(r); ok {
			d.orders.add(d.orders.keyName(key), e, limit)
		}
	}
}

// observe adds a record to the committed state without judging it: the
// catch-up on records that another instance (or an earlier run) audited.
// It must not be called while a batch is open.
func (d *detector) observe(r *kgo.Record, now time.Time) {
	k := partKey{r.Topic, r.Partition}
	prev := d.last[k]
	if id, ok := d.numberOf(r); ok {
		limit := d.limitBucket(now.UnixMilli())
		d.dups.add(id, limit)
		d.observeOrder(r, id, limit)
		d.last[k] = lastSeen{offset: r.Offset, id: id, hasID: true}
		return
	}
	d.last[k] = lastSeen{offset: r.Offset, id: prev.id, hasID: prev.hasID}
}

// forget drops what the detector knows of a partition's last record, for a
// partition whose offsets were moved back behind it.
func (d *detector) forget(k partKey) { delete(d.last, k) }

// numberOf finds a record's number as codec.RecordNumber says, from the
// last HeaderNumber header (the worker appends its own after the input's),
// else from the value (valueNumber, or the JSON field).
func (d *detector) numberOf(r *kgo.Record) (int64, bool) {
	if h, ok := numberHeader(r); ok {
		return codec.RecordNumber(h, true, nil, d.cfg.field)
	}
	if d.cfg.valueNumber != nil {
		return d.cfg.valueNumber(r)
	}
	return codec.RecordNumber(nil, false, r.Value, d.cfg.field)
}

// numberHeader returns the record's last HeaderNumber header.
func numberHeader(r *kgo.Record) ([]byte, bool) {
	return codec.LastHeader(r.Headers, codec.HeaderNumber)
}

// sourceOf returns the record's HeaderSource when it is a well-formed UTF-8
// topic/partition/offset, else "": the audit record's source is either a
// location that can be looked up or nothing.
func sourceOf(r *kgo.Record) string {
	v, ok := codec.LastHeader(r.Headers, codec.HeaderSource)
	if !ok {
		return ""
	}
	s := string(v)
	if _, _, _, err := codec.ParseSource(s); err != nil || !utf8.ValidString(s) {
		return ""
	}
	return s
}

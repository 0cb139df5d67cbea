package audit

import (
	"cmp"
	"encoding/json"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flakestream/flakestream/idgen"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// maxPairs bounds the (server, worker) pairs tracked by label and on the
// page: a third party writing random numbers must not grow them without
// end. Pairs past it are counted together as server and worker "other".
const maxPairs = 1024

// rateSeconds is how many seconds of rates the live page shows.
const rateSeconds = 60

// auditMetrics are the auditor's Prometheus metrics; franz-go's client
// metrics come from plugin/kprom under flakestream_audit_ on the same
// registry.
type auditMetrics struct {
	records   prometheus.Counter
	numbers   *prometheus.CounterVec
	anomalies *prometheus.CounterVec
	flagged   prometheus.Counter
	lagMs     prometheus.Histogram
	seqPerMs  prometheus.Histogram
	lag       *prometheus.GaugeVec
	txns      *prometheus.CounterVec

	// Read by the func metrics; written after each committed batch.
	dupEntries, dupEvictions, unchecked, effectiveMs atomic.Int64
	orderEntries, orderEvictions                     atomic.Int64
}

// lagBuckets are upper bounds in ms on both sides of 0: the worker keeps an
// input record's timestamp, so numbering delay shows as a negative lag.
var lagBuckets = func() []float64 {
	pos := []float64{1, 10, 100, 1000, 10000, 60000, 300000, 3600000, 86400000}
	var b []float64
	for i := len(pos) - 1; i >= 0; i-- {
		b = append(b, -pos[i])
	}
	return append(append(b, 0), pos...)
}()

func newAuditMetrics(reg prometheus.Registerer, l idgen.Layout) *auditMetrics {
	ns := "flakestream"
	m := &auditMetrics{
		records: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "audit_records_total",
			Help: "Audit records written (committed)."}),
		numbers: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "audit_numbers_total",
			Help: "Numbers decoded, by server and worker ID (\"other\" past 1024 pairs)."}, []string{"server", "worker"}),
		anomalies: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "audit_anomalies_total",
			Help: "Anomalies flagged, by kind: a record with several counts under each (flakestream_audit_flagged_records_total counts the records)."}, []string{"kind"}),
		flagged: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "audit_flagged_records_total",
			Help: "Audit records with at least one anomaly, each counted once however many it has."}),
		lagMs: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "audit_lag_ms",
			Help: "Record timestamp minus the number's time, in ms (negative: the record's timestamp is older than its number).", Buckets: lagBuckets}),
		seqPerMs: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "audit_sequence_per_ms",
			Help:    "Highest sequence + 1 seen in each millisecond of each (server, worker): how close a pair comes to its " + strconv.FormatInt(l.PerMillisecond(), 10) + " numbers per ms.",
			Buckets: prometheus.ExponentialBuckets(1, 2, l.SequenceBits+1)}),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "audit_consumer_lag",
			Help: "Records between the audit group's committed offset and the end of each numbered partition."}, []string{"topic", "partition"}),
		txns: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "audit_transactions_total",
			Help: "Audit batches ended, by result (committed, aborted)."}, []string{"result"}),
	}
	for _, k := range anomalyKinds {
		m.anomalies.WithLabelValues(k)
	}
	m.txns.WithLabelValues("committed")
	m.txns.WithLabelValues("aborted")
	if reg == nil {
		return m
	}
	fn := func(name, help string, v *atomic.Int64, counter bool) prometheus.Collector {
		f := func() float64 { return float64(v.Load()) }
		if counter {
			return prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: ns, Name: name, Help: help}, f)
		}
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ns, Name: name, Help: help}, f)
	}
	reg.MustRegister(m.records, m.numbers, m.anomalies, m.flagged, m.lagMs, m.seqPerMs, m.lag, m.txns,
		fn("audit_dup_entries", "Numbers the duplicate window holds.", &m.dupEntries, false),
		fn("audit_dup_evictions_total", "Window buckets dropped early to stay within --dup-max-entries: the window was effectively shorter.", &m.dupEvictions, true),
		fn("audit_dup_unchecked_total", "Numbers the duplicate check skipped: older than the window behind the newest number seen, or beyond the clock plus --max-skew.", &m.unchecked, true),
		fn("audit_dup_window_ms", "Number time the duplicate window covers now (below --dup-window after evictions).", &m.effectiveMs, false),
		fn("audit_order_entries", "Orders (sources, and keys with --key) the order window holds, to flag renumbered.", &m.orderEntries, false),
		fn("audit_order_evictions_total", "Order window buckets dropped early to stay within --dup-max-entries: its window was effectively shorter.", &m.orderEvictions, true),
	)
	return m
}

// committed updates the metrics that do not go through the live state.
func (m *auditMetrics) committed(b *auditBatch, d *detector) {
	m.records.Add(float64(len(b.recs)))
	m.dupEntries.Store(int64(d.dups.entries))
	m.dupEvictions.Store(int64(d.dups.evictions))
	m.unchecked.Store(int64(d.unchecked))
	m.effectiveMs.Store(d.dups.effectiveMs())
	m.orderEntries.Store(int64(d.orders.entries))
	m.orderEvictions.Store(int64(d.orders.evictions))
}

// pairState is what the auditor tracks of one (server, worker) pair.
type pairState struct {
	server, worker int64 // -1 for "other"
	total          int64
	rate           secondRing
	numbers        prometheus.Counter
	curMs, maxSeq  int64 // for the sequence-per-ms histogram
}

// secondRing holds per-second sums for the last ringSize seconds.
type secondRing struct {
	sec [rateSeconds + 1]int64
	val [rateSeconds + 1]int64
}

func (r *secondRing) add(sec, n int64) {
	i := sec % int64(len(r.sec))
	if r.sec[i] != sec {
		r.sec[i], r.val[i] = sec, 0
	}
	r.val[i] += n
}

// series returns the sums of the rateSeconds complete seconds before now.
func (r *secondRing) series(now int64) []int64 {
	out := make([]int64, rateSeconds)
	for j := range out {
		s := now - rateSeconds + int64(j)
		if i := s % int64(len(r.sec)); s >= 0 && r.sec[i] == s {
			out[j] = r.val[i]
		}
	}
	return out
}

// liveState is what the live page shows: committed counts, rolling rates
// and the latest audit records. HTTP handlers read it while Run writes it.
type liveState struct {
	cfg *cfg
	m   *auditMetrics

	mu        sync.Mutex
	pairs     map[[2]int64]*pairState
	other     *pairState
	total     secondRing
	lagSum    secondRing
	lagCount  secondRing
	audited   int64
	anomalies [len(anomalyKinds)]int64 // flags, by kind
	flaggedN  int64                    // records with at least one flag
	lastLagMs int64
	recent    [][]byte // ring of audit record JSON, next at recentAt
	recentAt  int
	flagged   [][]byte
	flaggedAt int
	lastBatch time.Time
}

func newLiveState(c *cfg, m *auditMetrics) *liveState {
	return &liveState{cfg: c, m: m, pairs: map[[2]int64]*pairState{},
		recent: make([][]byte, 0, c.recent), flagged: make([][]byte, 0, c.recent)}
}

func (s *liveState) pair(server, worker int64) *pairState {
	if p, ok := s.pairs[[2]int64{server, worker}]; ok {
		return p
	}
	if len(s.pairs) >= maxPairs {
		if s.other == nil {
			s.other = &pairState{server: -1, worker: -1, numbers: s.m.numbers.WithLabelValues("other", "other"), curMs: -1}
		}
		return s.other
	}
	p := &pairState{server: server, worker: worker, curMs: -1,
		numbers: s.m.numbers.WithLabelValues(strconv.FormatInt(server, 10), strconv.FormatInt(worker, 10))}
	s.pairs[[2]int64{server, worker}] = p
	return p
}

// add takes in a committed batch at Unix time now.
func (s *liveState) add(b *auditBatch, now time.Time) {
	sec := now.Unix()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastBatch = now
	s.audited += int64(len(b.recs))
	s.total.add(sec, int64(len(b.recs)))
	var kinds [len(anomalyKinds)]int
	for i := range b.recs {
		r := &b.recs[i]
		for k := range anomalyKinds {
			if b.sets[i]&(1<<k) != 0 {
				kinds[k]++
			}
		}
		if b.sets[i] != 0 {
			s.flaggedN++
			s.m.flagged.Inc()
			s.flagged, s.flaggedAt = pushRing(s.flagged, s.flaggedAt, b.values[i], s.cfg.recent)
		}
		if !r.Valid {
			continue
		}
		p := s.pair(r.Server, r.Worker)
		p.total++
		p.rate.add(sec, 1)
		p.numbers.Inc()
		switch ms := r.UnixMs; {
		case ms > p.curMs:
			if p.curMs >= 0 {
				s.m.seqPerMs.Observe(float64(p.maxSeq + 1))
			}
			p.curMs, p.maxSeq = ms, r.Sequence
		case ms == p.curMs:
			p.maxSeq = max(p.maxSeq, r.Sequence)
		}
		s.m.lagMs.Observe(float64(r.LagMs))
		s.lagSum.add(sec, r.LagMs)
		s.lagCount.add(sec, 1)
		s.lastLagMs = r.LagMs
	}
	for k, n := range kinds {
		if n > 0 {
			s.anomalies[k] += int64(n)
			s.m.anomalies.WithLabelValues(anomalyKinds[k]).Add(float64(n))
		}
	}
	for _, v := range b.values[max(0, len(b.values)-s.cfg.recent):] {
		s.recent, s.recentAt = pushRing(s.recent, s.recentAt, v, s.cfg.recent)
	}
}

// pushRing copies v into a ring of at most n entries whose next slot is at.
func pushRing(ring [][]byte, at int, v []byte, n int) ([][]byte, int) {
	if len(ring) < n {
		return append(ring, append([]byte(nil), v...)), 0
	}
	ring[at] = append(ring[at][:0], v...)
	return ring, (at + 1) % n
}

// newestFirst returns the ring's entries as one JSON array, newest first.
func newestFirst(ring [][]byte, at int) json.RawMessage {
	out := []byte{'['}
	n := len(ring)
	for j := 0; j < n; j++ {
		// With a full ring the newest is just before at; until then, last.
		i := (at - 1 - j + 2*n) % n
		if j > 0 {
			out = append(out, ',')
		}
		out = append(out, ring[i]...)
	}
	return append(out, ']')
}

// liveSummary is the JSON of /api/summary, which the live page polls.
type liveSummary struct {
	NowMs       int64            `json:"now_ms"`
	Ready       string           `json:"ready"` // "" when ready, else why not
	Inputs      []string         `json:"inputs"`
	Topic       string           `json:"audit_topic"`
	Group       string           `json:"group"`
	Layout      string           `json:"layout"`
	DupWindowMs int64            `json:"dup_window_ms"`
	MaxSkewMs   int64            `json:"max_skew_ms"`
	MaxLagMs    int64            `json:"max_lag_ms"`
	Servers     []int64          `json:"allowed_servers"` // null: any
	Workers     []int64          `json:"allowed_workers"` // null: any
	Key         string           `json:"key"`             // --key, "" when off
	Audited     int64            `json:"audited"`
	Kinds       []string         `json:"kinds"`
	Anomalies   map[string]int64 `json:"anomalies"`       // flags by kind: a record may have several
	FlaggedRecs int64            `json:"flagged_records"` // records with at least one flag
	Rate        []int64          `json:"rate"`            // numbers per second, oldest first, last complete second last
	LagAvgMs    []float64        `json:"lag_avg_ms"`
	LastLagMs   int64            `json:"last_lag_ms"`
	ConsumerLag int64            `json:"consumer_lag"`
	LastBatchMs int64            `json:"last_batch_ms"`
	Pairs       []pairSummary    `json:"pairs"`
	Dup         dupSummary       `json:"dup"`
	Recent      json.RawMessage  `json:"recent"`  // audit records, newest first
	Flagged     json.RawMessage  `json:"flagged"` // audit records with anomalies, newest first
}

type pairSummary struct {
	Server string  `json:"server"`
	Worker string  `json:"worker"`
	Total  int64   `json:"total"`
	Rate   []int64 `json:"rate"`
}

type dupSummary struct {
	Entries     int64 `json:"entries"`
	MaxEntries  int   `json:"max_entries"`
	Evictions   int64 `json:"evictions"`
	Unchecked   int64 `json:"unchecked"`
	EffectiveMs int64 `json:"effective_ms"`
	// The order window's (renumbered): its entries and evictions.
	OrderEntries   int64 `json:"order_entries"`
	OrderEvictions int64 `json:"order_evictions"`
}

// summary returns the live page's data as of now.
func (s *liveState) summary(now time.Time, ready error) liveSummary {
	c := s.cfg
	sum := liveSummary{
		NowMs: now.UnixMilli(), Inputs: c.eos.Topics, Topic: c.auditTopic, Group: c.eos.Group,
		Layout: c.layout.String(), DupWindowMs: c.dupWindow.Milliseconds(), MaxSkewMs: c.maxSkew.Milliseconds(),
		MaxLagMs: c.maxLag.Milliseconds(), Kinds: anomalyKinds[:], Anomalies: map[string]int64{},
		ConsumerLag: int64(gaugeSum(s.m.lag)), Servers: sortedIDs(c.servers), Workers: sortedIDs(c.workers),
		Dup: dupSummary{Entries: s.m.dupEntries.Load(), MaxEntries: c.dupMaxEntries, Evictions: s.m.dupEvictions.Load(),
			Unchecked: s.m.unchecked.Load(), EffectiveMs: s.m.effectiveMs.Load(),
			OrderEntries: s.m.orderEntries.Load(), OrderEvictions: s.m.orderEvictions.Load()},
	}
	if c.key != nil {
		sum.Key = c.key.String()
	}
	if ready != nil {
		sum.Ready = ready.Error()
	}
	sec := now.Unix()
	s.mu.Lock()
	defer s.mu.Unlock()
	sum.Audited, sum.LastLagMs, sum.FlaggedRecs = s.audited, s.lastLagMs, s.flaggedN
	if !s.lastBatch.IsZero() {
		sum.LastBatchMs = s.lastBatch.UnixMilli()
	}
	for i, k := range anomalyKinds {
		sum.Anomalies[k] = s.anomalies[i]
	}
	sum.Rate = s.total.series(sec)
	lagSum, lagN := s.lagSum.series(sec), s.lagCount.series(sec)
	sum.LagAvgMs = make([]float64, len(lagSum))
	for i := range lagSum {
		if lagN[i] > 0 {
			sum.LagAvgMs[i] = float64(lagSum[i]) / float64(lagN[i])
		}
	}
	all := make([]*pairState, 0, len(s.pairs)+1)
	for _, p := range s.pairs {
		all = append(all, p)
	}
	if s.other != nil {
		all = append(all, s.other)
	}
	slices.SortFunc(all, func(a, b *pairState) int {
		return cmp.Or(cmp.Compare(b.total, a.total), cmp.Compare(a.server, b.server), cmp.Compare(a.worker, b.worker))
	})
	for _, p := range all[:min(len(all), 64)] {
		ps := pairSummary{Server: "other", Worker: "other", Total: p.total, Rate: p.rate.series(sec)}
		if p.server >= 0 {
			ps.Server, ps.Worker = strconv.FormatInt(p.server, 10), strconv.FormatInt(p.worker, 10)
		}
		sum.Pairs = append(sum.Pairs, ps)
	}
	sum.Recent = newestFirst(s.recent, s.recentAt)
	sum.Flagged = newestFirst(s.flagged, s.flaggedAt)
	return sum
}

func sortedIDs(m map[int64]struct{}) []int64 {
	if m == nil {
		return nil
	}
	ids := make([]int64, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// gaugeSum adds up every child of a gauge vector.
func gaugeSum(g *prometheus.GaugeVec) float64 {
	ch := make(chan prometheus.Metric, 16)
	go func() { g.Collect(ch); close(ch) }()
	var sum float64
	for m := range ch {
		var d dto.Metric
		if m.Write(&d) == nil && d.Gauge != nil {
			sum += d.Gauge.GetValue()
		}
	}
	return sum
}

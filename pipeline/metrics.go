package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/flakestream/flakestream/eos"
	"github.com/flakestream/flakestream/idgen"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// workerMetrics are the worker's own metrics; franz-go's client metrics come
// from plugin/kprom on the same registry.
type workerMetrics struct {
	in, numbered, passthrough, dlqTotal, repeats, dropped prometheus.Counter
	assigned                                              prometheus.Counter
	dlq, renumbered                                       *prometheus.CounterVec
	txns                                                  *prometheus.CounterVec
	batchSeconds                                          prometheus.Histogram
	lag                                                   *prometheus.GaugeVec
	phases                                                *prometheus.HistogramVec
}

func newWorkerMetrics(reg prometheus.Registerer) *workerMetrics {
	f := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "flakestream", Name: name, Help: help})
	}
	m := &workerMetrics{
		in:       f("records_in_total", "Records consumed and committed: numbered + passthrough + dead-lettered."),
		numbered: f("records_numbered_total", "Records given a new number and committed."),
		assigned: f("numbers_assigned_total", "Numbers given to records, committed or not: those of aborted transactions are gaps "+
			"(flakestream_records_numbered_total counts the committed ones; flakestream_numbers_reserved_total what was reserved for them)."),
		passthrough: f("records_passthrough_total", "Records that already carried a valid number, passed through unchanged."),
		dlqTotal:    f("records_dlq_total", "Records sent to the dead-letter topic."),
		repeats:     f("records_repeat_total", "Records whose idempotency key already had a number."),
		dropped:     f("records_repeat_dropped_total", "Repeats dropped (--on-repeat drop)."),
		dlq: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "flakestream", Name: "dlq_records_total",
			Help: "Dead-lettered records by error class."}, []string{"class"}),
		renumbered: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "flakestream", Name: "records_renumbered_total",
			Help: "Records whose pre-filled number was not believed and was replaced (--on-rejected-number renumber), by the class it was rejected for; counted among numbered."}, []string{"class"}),
		txns: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "flakestream", Name: "transactions_total",
			Help: "Transactions ended, by result (committed, aborted)."}, []string{"result"}),
		batchSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "flakestream", Name: "batch_seconds",
			Help: "Time from poll to committed transaction.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 14)}),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "flakestream", Name: "consumer_lag",
			Help: "Records between the group's committed offset and the end of each input partition."}, []string{"topic", "partition"}),
		phases: eos.NewPhaseHistogram(),
	}
	if reg != nil {
		reg.MustRegister(m.in, m.numbered, m.assigned, m.passthrough, m.dlqTotal, m.repeats, m.dropped, m.dlq, m.renumbered, m.txns, m.batchSeconds, m.lag, m.phases)
	}
	return m
}

func (m *workerMetrics) committed(c counts, took time.Duration) {
	m.in.Add(float64(c.in))
	m.numbered.Add(float64(c.numbered))
	m.passthrough.Add(float64(c.passthrough))
	m.dlqTotal.Add(float64(c.dlq))
	m.repeats.Add(float64(c.repeats))
	m.dropped.Add(float64(c.dropped))
	for class, n := range c.dlqByClass {
		m.dlq.WithLabelValues(string(class)).Add(float64(n))
	}
	for class, n := range c.renumbered {
		m.renumbered.WithLabelValues(string(class)).Add(float64(n))
	}
	m.batchSeconds.Observe(took.Seconds())
}

// RegisterGenerator exports a generator's counters: numbers reserved,
// sequencer round trips, overflow waits and the time spent waiting.
//
// flakestream_numbers_issued_total is the old name of
// flakestream_numbers_reserved_total, kept for one release: it was read as
// the numbers given to records, which it never counted (a block is
// reserved whole, ahead of need).
func RegisterGenerator(reg prometheus.Registerer, g *idgen.Generator) {
	f := func(name, help string, v func(idgen.Stats) float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "flakestream", Name: name, Help: help},
			func() float64 { return v(g.Stats()) })
	}
	reserved := func(s idgen.Stats) float64 { return float64(s.Numbers) }
	reg.MustRegister(
		f("numbers_reserved_total", "Numbers reserved from the sequencer, in blocks ahead of need: each is given to one record at most, "+
			"and one never given (prefetched and then dropped, or left at shutdown) is a gap (flakestream_numbers_assigned_total counts the given ones).", reserved),
		f("numbers_issued_total", "Deprecated: the same value as flakestream_numbers_reserved_total, under its old name, removed in the release after v0.1.0. "+
			"It counts numbers reserved, not numbers given to records (flakestream_numbers_assigned_total).", reserved),
		f("sequencer_reservations_total", "Sequencer round trips that returned a block.", func(s idgen.Stats) float64 { return float64(s.Reservations) }),
		f("overflow_waits_total", "Waits for the next millisecond because one was full (or the clock was behind).", func(s idgen.Stats) float64 { return float64(s.Waits) }),
		f("overflow_wait_seconds_total", "Time spent in those waits.", func(s idgen.Stats) float64 { return s.Waited.Seconds() }),
	)
}

// TimedSequencer records the latency of every sequencer round trip.
type TimedSequencer struct {
	idgen.Sequencer
	hist prometheus.Observer
}

// NewTimedSequencer wraps s and registers flakestream_sequencer_seconds.
func NewTimedSequencer(s idgen.Sequencer, reg prometheus.Registerer) *TimedSequencer {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "flakestream", Name: "sequencer_seconds",
		Help: "Latency of one sequencer (Redis) round trip.", Buckets: prometheus.ExponentialBuckets(0.00005, 2, 14)})
	reg.MustRegister(h)
	return &TimedSequencer{Sequencer: s, hist: h}
}

// Reserve implements idgen.Sequencer.
func (t *TimedSequencer) Reserve(ctx context.Context, req idgen.Request) (idgen.Block, error) {
	start := time.Now()
	b, err := t.Sequencer.Reserve(ctx, req)
	t.hist.Observe(time.Since(start).Seconds())
	return b, err
}

// Serve serves /metrics from reg, /healthz, and /readyz (ready reports why
// not, or nil) on addr until ctx ends. extra adds handlers (the audit page).
func Serve(ctx context.Context, addr string, reg *prometheus.Registry, ready func() error, extra map[string]http.Handler, log *slog.Logger) (net.Addr, error) {
	mux, err := Handler(reg, ready, extra)
	if err != nil {
		return nil, err
	}
	return ServeHandler(ctx, addr, mux, func(l net.Listener, srv *http.Server) error { return srv.Serve(l) }, log)
}

// ServeHandler serves h on addr until ctx ends, through serve (srv.Serve,
// or a wrapper that adds TLS and authentication), and returns the address
// bound; a server that stops with an error is logged.
func ServeHandler(ctx context.Context, addr string, h http.Handler, serve func(net.Listener, *http.Server) error, log *slog.Logger) (net.Addr, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	go func() {
		if err := serve(l, srv); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("http server stopped", "addr", l.Addr().String(), "err", err)
		}
	}()
	return l.Addr(), nil
}

// Handler is what Serve serves: /metrics from reg (with flakestream_ready,
// which it registers), /healthz, /readyz and the extra handlers, for a
// caller that runs its own server (with TLS or authentication).
func Handler(reg *prometheus.Registry, ready func() error, extra map[string]http.Handler) (http.Handler, error) {
	if err := reg.Register(newReadyGauge(ready)); err != nil {
		return nil, fmt.Errorf("register flakestream_ready: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := ready(); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	for path, h := range extra {
		mux.Handle(path, h)
	}
	return mux, nil
}

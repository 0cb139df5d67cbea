package demo

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"time"

	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/idgen"
	"github.com/flakestream/flakestream/pipeline"
	"github.com/flakestream/flakestream/verify"
	"github.com/prometheus/client_golang/prometheus"
)

// ServeConfig is what `demo --serve` runs with.
type ServeConfig struct {
	// Partitions of the demo topics.
	Partitions int32
	// Rate is orders a second.
	Rate int
	// StopAfter stops the stream by itself after this long; 0 runs it
	// until ctx ends.
	StopAfter time.Duration
	// HTTPAddr serves the worker's /metrics, /healthz and /readyz;
	// AuditHTTPAddr the audit's live page and /metrics.
	HTTPAddr, AuditHTTPAddr string
	// WorkerRegistry and AuditRegistry are what each address serves.
	WorkerRegistry, AuditRegistry *prometheus.Registry
	// Timeout bounds the shutdown (drain and accounting) after the stream
	// stops.
	Timeout time.Duration
	// Log is where the parts log.
	Log *slog.Logger
}

const (
	// statusEvery is how often a status line is printed.
	statusEvery = 10 * time.Second
	// trimEvery is how often what every reader has read is deleted from
	// the embedded Kafka, which holds its log in memory.
	trimEvery = 5 * time.Second
)

// Serve keeps the embedded stack running with a steady order stream, the
// audit's live page and both /metrics served, until ctx ends or StopAfter
// passes; then it stops the parts in order and accounts for every order.
// Progress lines for the user go to out.
func Serve(ctx context.Context, cfg ServeConfig, out io.Writer) (*Summary, error) {
	// The stack lives until the accounting is done: the signal that ends
	// ctx starts the shutdown, it does not cut it short.
	base := context.WithoutCancel(ctx)
	st, err := newServeStack(cfg)
	if err != nil {
		return nil, err
	}
	defer st.close()
	run, err := st.start(base, cfg)
	if err != nil {
		return nil, err
	}
	// Deferred after st.close, so it runs first: the parts stop before
	// their clients and the embedded services close.
	defer run.stop()

	start, trimmer, err := serveUntilStopped(ctx, base, cfg, out, st, run)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "  stopping after %s: draining the worker and the audit, then checking every order\n", time.Since(start).Round(time.Millisecond))
	dctx, cancel := context.WithTimeout(base, cfg.Timeout)
	defer cancel()
	sum, err := drainServe(dctx, serveParts{w: st.w, wdone: run.wdone, stopWorker: run.stopWorker, aud: run.aud, fol: st.fol, fdone: run.fdone,
		prod: st.prod, pdone: run.pdone, stopProducer: run.stopProducer, window: st.window, layout: st.layout, start: start})
	if err != nil {
		return nil, err
	}
	sum.Deleted, sum.TrimFailures, sum.LastTrimErr = trimmer.deletedRecords(), trimmer.failures, trimmer.lastErr
	return sum, nil
}

// serveStack is the embedded stack of `demo --serve`, built but not yet
// running: Kafka, Redis, the worker, and the accounting's reader and
// order stream.
type serveStack struct {
	brokers []string
	parts   int32
	wreg    *prometheus.Registry
	w       *pipeline.Worker
	layout  idgen.Layout
	window  *verify.Window
	fol     *serveFollower
	prod    *serveProducer
	// closers are run last to first by close.
	closers []func()
}

// close closes what newServeStack opened, last opened first.
func (st *serveStack) close() {
	for i := len(st.closers) - 1; i >= 0; i-- {
		st.closers[i]()
	}
}

// newServeStack starts the embedded Kafka and Redis and builds the parts
// that run on them; on an error it closes what it opened.
func newServeStack(cfg ServeConfig) (_ *serveStack, err error) {
	st := &serveStack{parts: cfg.Partitions, wreg: cfg.WorkerRegistry}
	defer func() {
		if err != nil {
			st.close()
		}
	}()
	// 1 MiB segments, so that deleting what was read frees memory soon:
	// kfake frees a segment once all of it is deleted.
	emb, err := StartEmbedded(st.parts, []string{inputTopic, outputTopic, dlqTopic, auditTopic},
		map[string]string{"log.segment.bytes": "1048576"},
		func(s idgen.Sequencer) idgen.Sequencer { return pipeline.NewTimedSequencer(s, st.wreg) })
	if err != nil {
		return nil, err
	}
	st.closers = append(st.closers, emb.Close)
	st.brokers = emb.Brokers
	gen, cd := emb.Gen, emb.Codec
	pipeline.RegisterGenerator(st.wreg, gen)
	st.layout = gen.Layout()

	layout := st.layout
	st.window = verify.NewWindow(inputTopic, st.parts, verify.DefaultNumberWindow, func(n int64) int64 {
		p, _ := layout.Decompose(n)
		return p.UnixMs
	})
	format := codec.JSONFormat{C: cd}
	if st.fol, err = newServeFollower(st.brokers, st.window, format, outputTopic, dlqTopic, auditTopic); err != nil {
		return nil, err
	}
	st.closers = append(st.closers, st.fol.cl.Close)
	if st.prod, err = newServeProducer(st.brokers, inputTopic, st.parts, cfg.Rate, st.window, format); err != nil {
		return nil, err
	}
	st.closers = append(st.closers, st.prod.cl.Close)
	ws := workerSettings(st.brokers, cfg.Log)
	ws.Registerer = st.wreg
	st.w, err = pipeline.NewWorker(ws, workerOptions(gen, cd)...)
	if err != nil {
		return nil, err
	}
	return st, nil
}

// serveRun is the running stack: each part's exit, its stop, and the
// addresses the two HTTP servers listen on.
type serveRun struct {
	wdone, fdone, pdone      chan error
	stopWorker, stopProducer context.CancelFunc
	aud                      *auditor
	waddr, aaddr             net.Addr
	// stops are run last to first by stop.
	stops []func()
}

// stop stops every part start started, last started first. Each stop may
// already have run (drainServe stops the parts in order); they all may
// run again.
func (r *serveRun) stop() {
	for i := len(r.stops) - 1; i >= 0; i-- {
		r.stops[i]()
	}
}

// start runs the worker, the audit, both HTTP servers, the accounting's
// reader and the order stream, in that order, each under base; on an
// error it stops what it started.
func (st *serveStack) start(base context.Context, cfg ServeConfig) (_ *serveRun, err error) {
	r := &serveRun{wdone: make(chan error, 1), fdone: make(chan error, 1), pdone: make(chan error, 1)}
	defer func() {
		if err != nil {
			r.stop()
		}
	}()
	srvCtx, stopServers := context.WithCancel(base)
	r.stops = append(r.stops, stopServers)
	wctx, stopWorker := context.WithCancel(base)
	r.stopWorker = stopWorker
	r.stops = append(r.stops, stopWorker)
	go func() { r.wdone <- st.w.Run(wctx) }()
	if r.aud, err = startAudit(base, st.brokers, st.layout, cfg.Log, cfg.AuditRegistry); err != nil {
		return nil, err
	}
	r.stops = append(r.stops, r.aud.stop)
	if r.waddr, err = pipeline.Serve(srvCtx, cfg.HTTPAddr, st.wreg, st.w.Ready, nil, cfg.Log); err != nil {
		return nil, &AddrError{Addr: cfg.HTTPAddr, Err: err}
	}
	if r.aaddr, err = pipeline.Serve(srvCtx, cfg.AuditHTTPAddr, cfg.AuditRegistry, r.aud.a.Ready, r.aud.a.Handlers(), cfg.Log); err != nil {
		return nil, &AddrError{Audit: true, Addr: cfg.AuditHTTPAddr, Err: err}
	}
	fctx, stopFollower := context.WithCancel(base)
	r.stops = append(r.stops, stopFollower)
	go func() { r.fdone <- st.fol.run(fctx) }()
	pctx, stopProducer := context.WithCancel(base)
	r.stopProducer = stopProducer
	r.stops = append(r.stops, stopProducer)
	go func() { r.pdone <- st.prod.run(pctx) }()
	return r, nil
}

// serveUntilStopped prints where the stack serves, then trims the
// embedded Kafka and prints a status line on their tickers until ctx ends
// or --stop-after passes (nil error), or a part stops by itself (its
// error). It returns when the stack started serving and the trimmer, whose
// counts the summary prints.
func serveUntilStopped(ctx, base context.Context, cfg ServeConfig, out io.Writer, st *serveStack, r *serveRun) (time.Time, *serveTrimmer, error) {
	fmt.Fprintf(out, "flakestream demo --serve: %d orders a second on in-process Kafka (kfake) and Redis (miniredis), audited live\n", cfg.Rate)
	fmt.Fprintf(out, "  live page        http://%s/\n  audit metrics    http://%s/metrics\n  worker metrics   http://%s/metrics\n", r.aaddr, r.aaddr, r.waddr)
	stopIn := "Ctrl-C stops it and checks every order: exactly once, or says what went wrong"
	var stopAfter <-chan time.Time
	if cfg.StopAfter > 0 {
		stopAfter = time.After(cfg.StopAfter)
		stopIn = fmt.Sprintf("it stops after %s (or on Ctrl-C) and checks every order", cfg.StopAfter)
	}
	fmt.Fprintf(out, "  %s\n", stopIn)

	start := time.Now()
	status := time.NewTicker(statusEvery)
	defer status.Stop()
	trim := time.NewTicker(trimEvery)
	defer trim.Stop()
	trimmer := newServeTrimmer(st.fol, inputTopic, outputTopic, dlqTopic, auditTopic)
	for {
		select {
		case <-ctx.Done():
			return start, trimmer, nil
		case <-stopAfter:
			return start, trimmer, nil
		case err := <-r.wdone:
			return start, trimmer, fmt.Errorf("the worker stopped: %v", err)
		case err := <-r.aud.done:
			return start, trimmer, fmt.Errorf("the audit stopped: %v", err)
		case err := <-r.pdone:
			return start, trimmer, fmt.Errorf("the order stream stopped: %v", err)
		case err := <-r.fdone:
			return start, trimmer, fmt.Errorf("the accounting's reader stopped: %v", err)
		case <-trim.C:
			if err := trimmer.trimWithin(base, trimEvery); err != nil {
				cfg.Log.Warn("trimming the embedded Kafka", "err", err)
			}
		case <-status.C:
			ws, as := st.w.Stats(), r.aud.a.Stats()
			now, _ := st.window.Held()
			fmt.Fprintf(out, "  %8s  in %d, numbered %d, passthrough %d, dead-lettered %d, audited %d; in flight %d\n",
				time.Since(start).Round(time.Second), st.prod.produced.Load(), ws.Numbered, ws.Passthrough, ws.DLQ, as.Audited, now.InFlight)
		}
	}
}

// serveParts are the running parts drainServe stops.
type serveParts struct {
	w            *pipeline.Worker
	wdone        chan error
	stopWorker   context.CancelFunc
	aud          *auditor
	fol          *serveFollower
	fdone        chan error
	prod         *serveProducer
	pdone        chan error
	stopProducer context.CancelFunc
	window       *verify.Window
	layout       idgen.Layout
	start        time.Time
}

// drainServe stops the stack in dependency order, each step bounded by
// ctx: no new orders; the worker numbers every order produced, then stops
// (its last transaction committed); the accounting reads the output and
// dead-letter topics to their end; the audit audits every numbered record,
// then stops; the accounting reads the audit topic to its end.
func drainServe(ctx context.Context, p serveParts) (*Summary, error) {
	p.stopProducer()
	if err := <-p.pdone; err != nil {
		return nil, fmt.Errorf("the order stream: %w", err)
	}
	took := time.Since(p.start)
	n := p.prod.produced.Load()
	if err := waitUntil(ctx, p.wdone, func() bool { return p.w.Stats().In >= n },
		func() string { return fmt.Sprintf("the worker read %d of %d orders", p.w.Stats().In, n) }); err != nil {
		return nil, err
	}
	p.stopWorker()
	if err := <-p.wdone; err != nil {
		return nil, fmt.Errorf("the worker: %w", err)
	}
	if err := p.fol.readToEnd(ctx, p.fdone, p.fol.output, p.fol.dlq); err != nil {
		return nil, err
	}
	want := p.fol.outputs.Load()
	if err := waitUntil(ctx, p.aud.done, func() bool { return p.aud.a.Stats().Audited >= want },
		func() string { return fmt.Sprintf("audited %d of %d numbered records", p.aud.a.Stats().Audited, want) }); err != nil {
		return nil, err
	}
	p.aud.stop()
	if err := <-p.aud.done; err != nil {
		return nil, fmt.Errorf("the audit: %w", err)
	}
	if err := p.fol.readToEnd(ctx, p.fdone, p.fol.audit); err != nil {
		return nil, err
	}
	audited := p.fol.audited.Load()
	if audited != want {
		return nil, fmt.Errorf("%d audit records for %d numbered records: not exactly once", audited, want)
	}

	if err := p.fol.failed(); err != nil {
		return nil, err
	}
	_, most := p.window.Held()
	rep := p.window.Report()
	a := auditSummary{topic: auditTopic, audited: int(audited), anomalies: p.aud.a.Stats().Anomalies, samples: p.fol.auditSamples()}
	sum := newSummary(rep.Report, int(n), took, p.layout, p.fol.deadLetters(), p.fol.outputSamples(), a)
	sum.UncheckedNumbers = rep.UncheckedNumbers
	sum.Held, sum.Window = most, verify.DefaultNumberWindow
	return sum, nil
}

// AddrError is an address Serve could not serve on.
type AddrError struct {
	// Audit is set for the audit's address, unset for the worker's.
	Audit bool
	Addr  string
	Err   error
}

func (e *AddrError) Error() string {
	what := "the worker's /metrics"
	if e.Audit {
		what = "the audit's live page"
	}
	return fmt.Sprintf("serve %s on %s: %v", what, e.Addr, e.Err)
}

// Unwrap returns the cause.
func (e *AddrError) Unwrap() error { return e.Err }

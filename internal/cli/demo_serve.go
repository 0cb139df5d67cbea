package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"time"

	"github.com/flakestream/flakestream/idgen"
	"github.com/flakestream/flakestream/internal/verify"
	"github.com/flakestream/flakestream/pipeline"
	"github.com/flakestream/flakestream/pipeline/audit"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/urfave/cli/v2"
)

// The flags of `demo --serve`.
const (
	flagServe         = "serve"
	flagRate          = "rate"
	flagStopAfter     = "stop-after"
	flagAuditHTTPAddr = "audit-http-addr"
)

// Defaults of `demo --serve`, which belong to the CLI alone.
const (
	defaultServeRate          = 1000
	defaultServeHTTPAddr      = "127.0.0.1:9464"
	defaultServeAuditHTTPAddr = "127.0.0.1:9465"
	// maxServeRate bounds --rate: past it the embedded stack on one machine
	// falls behind anyway, and the in-flight orders the accounting holds
	// grow with the rate.
	maxServeRate = 100000
	// serveStatusEvery is how often a status line is printed.
	serveStatusEvery = 10 * time.Second
	// serveTrimEvery is how often what every reader has read is deleted
	// from the embedded Kafka, which holds its log in memory.
	serveTrimEvery = 5 * time.Second
)

// serveConfig is what `demo --serve` reads from its flags.
type serveConfig struct {
	on                  bool
	rate                int
	stopAfter           time.Duration
	httpAddr, auditAddr string
}

func (s *serveConfig) flags() []cli.Flag {
	return []cli.Flag{
		boolFlag(flagServe, &s.on, "keep the demo running with a steady order stream, serve the audit's live page and both /metrics, and check exactly once on Ctrl-C"),
		intFlag(flagRate, &s.rate, defaultServeRate, "with --serve: orders a second (one in a thousand malformed, every dead-letter class in turn)"),
		durationFlag(flagStopAfter, &s.stopAfter, 0, "with --serve: stop by itself after this long (0: run until Ctrl-C)"),
		stringFlag(flagHTTPAddr, &s.httpAddr, defaultServeHTTPAddr, "with --serve: serve the worker's /metrics, /healthz and /readyz on this address"),
		stringFlag(flagAuditHTTPAddr, &s.auditAddr, defaultServeAuditHTTPAddr, "with --serve: serve the audit's live page and /metrics on this address"),
	}
}

// unused refuses the flags only --serve reads on a one-shot demo, where
// they would quietly do nothing. (Not --http-addr: its FLAKESTREAM_HTTP_ADDR
// may be set for run or audit.)
func (s *serveConfig) unused(c *cli.Context) error {
	for _, f := range []string{flagRate, flagStopAfter, flagAuditHTTPAddr} {
		if c.IsSet(f) {
			return usageErr("--%s needs --%s", f, flagServe)
		}
	}
	return nil
}

// runServe is `demo --serve`: the embedded stack kept running until the
// first signal (or --stop-after), then stopped in order and accounted for.
func (cfg *demoConfig) runServe(c *cli.Context) error {
	s := &cfg.serve
	if c.IsSet(flagOrders) {
		return usageErr("--%s is for the one-shot demo; --%s runs until Ctrl-C (or --%s)", flagOrders, flagServe, flagStopAfter)
	}
	if s.rate < 1 || s.rate > maxServeRate {
		return usageErr("--%s %d: want 1 to %d orders a second", flagRate, s.rate, maxServeRate)
	}
	if cfg.partitions < 1 {
		return usageErr("--%s must be at least 1", flagPartitions)
	}
	if s.stopAfter < 0 {
		return usageErr("--%s %s: want 0 (until Ctrl-C) or more", flagStopAfter, s.stopAfter)
	}
	log := slog.New(slog.DiscardHandler)
	if cfg.verbose {
		log = slog.New(slog.NewTextHandler(c.App.ErrWriter, nil))
	}
	// Human lines go to standard output, unless that is for --json.
	out := c.App.Writer
	if cfg.json {
		out = c.App.ErrWriter
	}
	sum, err := serveDemo(c.Context, cfg, out, log)
	if err != nil {
		return fmt.Errorf("demo --serve: %w", err)
	}
	if cfg.json {
		b, _ := json.Marshal(sum.JSON)
		fmt.Fprintf(c.App.Writer, "%s\n", b)
	} else {
		sum.print(c.App.Writer)
		sum.printHeld(c.App.Writer)
	}
	if !sum.report.OK() {
		return fmt.Errorf("demo --serve: the output is not exactly once: %s", sum.report)
	}
	if sum.audit.flagged() > 0 {
		return fmt.Errorf("demo --serve: the audit flagged anomalies in clean data: %v", sum.audit.anomalies)
	}
	return nil
}

// serveSummary is the demo's summary with what the accounting held.
type serveSummary struct {
	*demoSummary
	held    verify.Held
	window  time.Duration
	trimmer *serveTrimmer
}

func (s *serveSummary) printHeld(w io.Writer) {
	fmt.Fprintf(w, "\nmemory: the accounting held at most %d orders in flight, %d out of order and %d numbers (its %s uniqueness window);\n",
		s.held.Pending+s.held.Early, s.held.OutOfOrder, s.held.Numbers, s.window)
	fmt.Fprintf(w, "  the embedded Kafka deleted %d records once every reader had read them", s.trimmer.deletedRecords())
	if s.trimmer.failures > 0 {
		fmt.Fprintf(w, " (%d deletions failed, the last: %v)", s.trimmer.failures, s.trimmer.lastErr)
	}
	fmt.Fprintln(w)
}

// The topics of `demo --serve`; the audit's is the numbered one's plus
// ".audit" (see startDemoAudit).
const (
	serveInputTopic  = "orders"
	serveOutputTopic = "orders.numbered"
	serveDLQTopic    = "orders.dlq"
	serveAuditTopic  = serveOutputTopic + ".audit"
)

// serveDemo runs the stack until ctx ends or --stop-after passes, then
// stops and checks it. Lines for the user go to out.
func serveDemo(ctx context.Context, cfg *demoConfig, out io.Writer, log *slog.Logger) (*serveSummary, error) {
	// The stack lives until the accounting is done: the signal that ends
	// ctx starts the shutdown, it does not cut it short.
	base := context.WithoutCancel(ctx)
	st, err := newServeStack(cfg, log)
	if err != nil {
		return nil, err
	}
	defer st.close()
	run, err := st.start(base, cfg, log)
	if err != nil {
		return nil, err
	}
	// Deferred after st.close, so it runs first: the parts stop before
	// their clients and the embedded services close.
	defer run.stop()

	start, trimmer, err := serveUntilStopped(ctx, base, cfg, out, log, st, run)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "  stopping after %s: draining the worker and the audit, then checking every order\n", time.Since(start).Round(time.Millisecond))
	dctx, cancel := context.WithTimeout(base, cfg.timeout)
	defer cancel()
	sum, err := drainServe(dctx, serveParts{w: st.w, wdone: run.wdone, stopWorker: run.stopWorker, aud: run.aud, fol: st.fol, fdone: run.fdone,
		prod: st.prod, pdone: run.pdone, stopProducer: run.stopProducer, stream: st.stream, layout: st.layout, start: start})
	if err != nil {
		return nil, err
	}
	sum.trimmer = trimmer
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
	stream  *verify.Stream
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
func newServeStack(cfg *demoConfig, log *slog.Logger) (_ *serveStack, err error) {
	st := &serveStack{parts: int32(cfg.partitions)}
	defer func() {
		if err != nil {
			st.close()
		}
	}()
	st.wreg = newRegistry()
	// 1 MiB segments, so that deleting what was read frees memory soon:
	// kfake frees a segment once all of it is deleted.
	emb, err := startEmbedded(st.parts, []string{serveInputTopic, serveOutputTopic, serveDLQTopic, serveAuditTopic},
		map[string]string{"log.segment.bytes": "1048576"},
		func(s idgen.Sequencer) idgen.Sequencer { return pipeline.NewTimedSequencer(s, st.wreg) })
	if err != nil {
		return nil, err
	}
	st.closers = append(st.closers, emb.close)
	st.brokers = emb.brokers
	gen, cd := emb.gen, emb.cd
	pipeline.RegisterGenerator(st.wreg, gen)
	st.layout = gen.Layout()

	st.stream = verify.NewStream(cd, st.layout, verify.DefaultNumberWindow)
	if st.fol, err = newServeFollower(st.brokers, st.stream, serveOutputTopic, serveDLQTopic, serveAuditTopic); err != nil {
		return nil, err
	}
	st.closers = append(st.closers, st.fol.cl.Close)
	if st.prod, err = newServeProducer(st.brokers, serveInputTopic, st.parts, cfg.serve.rate, st.stream); err != nil {
		return nil, err
	}
	st.closers = append(st.closers, st.prod.cl.Close)
	st.w, err = pipeline.NewWorker(append(demoWorkerOptions(st.brokers, serveInputTopic, serveOutputTopic, serveDLQTopic, gen, cd, log),
		pipeline.Registerer(st.wreg))...)
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
	aud                      *demoAudit
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
func (st *serveStack) start(base context.Context, cfg *demoConfig, log *slog.Logger) (_ *serveRun, err error) {
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
	areg := newRegistry()
	if r.aud, err = startDemoAudit(base, st.brokers, serveOutputTopic, st.layout, log, audit.Registerer(areg)); err != nil {
		return nil, err
	}
	r.stops = append(r.stops, r.aud.stop)
	if r.waddr, err = pipeline.Serve(srvCtx, cfg.serve.httpAddr, st.wreg, st.w.Ready, nil, log); err != nil {
		return nil, fmt.Errorf("--%s %s: %w", flagHTTPAddr, cfg.serve.httpAddr, err)
	}
	if r.aaddr, err = pipeline.Serve(srvCtx, cfg.serve.auditAddr, areg, r.aud.a.Ready, r.aud.a.Handlers(), log); err != nil {
		return nil, fmt.Errorf("--%s %s: %w", flagAuditHTTPAddr, cfg.serve.auditAddr, err)
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
func serveUntilStopped(ctx, base context.Context, cfg *demoConfig, out io.Writer, log *slog.Logger, st *serveStack, r *serveRun) (time.Time, *serveTrimmer, error) {
	fmt.Fprintf(out, "flakestream demo --serve: %d orders a second on in-process Kafka (kfake) and Redis (miniredis), audited live\n", cfg.serve.rate)
	fmt.Fprintf(out, "  live page        http://%s/\n  audit metrics    http://%s/metrics\n  worker metrics   http://%s/metrics\n", r.aaddr, r.aaddr, r.waddr)
	stopIn := "Ctrl-C stops it and checks every order: exactly once, or says what went wrong"
	var stopAfter <-chan time.Time
	if cfg.serve.stopAfter > 0 {
		stopAfter = time.After(cfg.serve.stopAfter)
		stopIn = fmt.Sprintf("it stops after %s (or on Ctrl-C) and checks every order", cfg.serve.stopAfter)
	}
	fmt.Fprintf(out, "  %s\n", stopIn)

	start := time.Now()
	status := time.NewTicker(serveStatusEvery)
	defer status.Stop()
	trim := time.NewTicker(serveTrimEvery)
	defer trim.Stop()
	trimmer := newServeTrimmer(st.fol, serveInputTopic, serveOutputTopic, serveDLQTopic, serveAuditTopic)
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
			if err := withTimeout(base, serveTrimEvery, trimmer.trim); err != nil {
				log.Warn("trimming the embedded Kafka", "err", err)
			}
		case <-status.C:
			ws, as := st.w.Stats(), r.aud.a.Stats()
			now, _ := st.stream.Held()
			fmt.Fprintf(out, "  %8s  in %d, numbered %d, passthrough %d, dead-lettered %d, audited %d; in flight %d\n",
				time.Since(start).Round(time.Second), st.prod.produced.Load(), ws.Numbered, ws.Passthrough, ws.DLQ, as.Audited, now.Pending+now.Early)
		}
	}
}

// serveParts are the running parts drainServe stops.
type serveParts struct {
	w            *pipeline.Worker
	wdone        chan error
	stopWorker   context.CancelFunc
	aud          *demoAudit
	fol          *serveFollower
	fdone        chan error
	prod         *serveProducer
	pdone        chan error
	stopProducer context.CancelFunc
	stream       *verify.Stream
	layout       idgen.Layout
	start        time.Time
}

// drainServe stops the stack in dependency order, each step bounded by
// ctx: no new orders; the worker numbers every order produced, then stops
// (its last transaction committed); the accounting reads the output and
// dead-letter topics to their end; the audit audits every numbered record,
// then stops; the accounting reads the audit topic to its end.
func drainServe(ctx context.Context, p serveParts) (*serveSummary, error) {
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

	rep := p.stream.Report()
	_, most := p.stream.Held()
	as := p.aud.a.Stats()
	p.aud.anomalies, p.aud.audited, p.aud.samples = as.Anomalies, int(audited), p.fol.auditSamples()
	sum := &demoSummary{report: rep, took: took, layout: p.layout, dlq: p.fol.deadLetters(), audit: p.aud, samples: p.fol.outputSamples()}
	sum.JSON = demoJSON{
		In: rep.In, Numbered: rep.Numbered, Passthrough: rep.Passthrough, DLQ: rep.DLQ,
		UniqueNumbers: rep.Unique, Duplicates: rep.Duplicated + rep.Numbered + rep.Passthrough - rep.Unique, Lost: rep.Lost,
		RecordsPerSec: float64(rep.In) / took.Seconds(),
		Audited:       int(audited), Anomalies: as.Anomalies,
	}
	return &serveSummary{demoSummary: sum, held: most, window: verify.DefaultNumberWindow}, nil
}

// waitUntil polls done until it holds, failing if the part whose exit
// is died reports one first or ctx ends (then with what progress says).
func waitUntil(ctx context.Context, died <-chan error, done func() bool, progress func() string) error {
	for !done() {
		select {
		case err := <-died:
			return fmt.Errorf("stopped early (%s): %v", progress(), err)
		case <-ctx.Done():
			return fmt.Errorf("%s before the --%s", progress(), flagTimeout)
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

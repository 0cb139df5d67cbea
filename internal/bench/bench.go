// Package bench measures what numbering costs: the worker's own
// consume-produce loop with numbering off (the ceiling), the full worker,
// the origin's way (one Redis call and one synchronous produce per record),
// reservations alone, and end-to-end latency at a fixed input rate. Every
// measurement uses the same record size, settings and transactions.
package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime/pprof"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/flakestream/flakestream/eos"
	"github.com/flakestream/flakestream/idgen"
	"github.com/flakestream/flakestream/internal/orders"
	"github.com/flakestream/flakestream/pipeline"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Config says what to measure and against what.
type Config struct {
	// Loop is the loop's settings of every measured worker: Brokers is
	// required (the caller starts kfake if it has none); each measurement
	// sets its own Topics, Group and InstanceID.
	Loop        eos.Config
	NewNumberer func() (*idgen.Generator, error)
	Duration    time.Duration // each throughput window
	Pairs       int           // passthrough/worker pairs, run interleaved
	RecordBytes int           // size of each order event
	// Event, if set, makes order event i instead of a JSON one of
	// RecordBytes (the Avro or Protobuf demo order, with a Format in
	// Worker).
	Event      func(i int) []byte
	Partitions int32          // partitions of every topic
	Worker     []pipeline.Opt // extra worker options (batch size, linger)
	// Lanes is the worker's lanes (pipeline.NewLanes; 0 is 1). The
	// passthrough and per-record baselines run one session.
	Lanes    int
	Progress func(string) // a line per step, or nil
	// PairsOnly skips per_record and latency (for sweeps over a setting).
	PairsOnly bool
	// LatencyRate is the fixed input rate (orders/s) of the first latency
	// measurement; the second runs at half the worker's throughput. 0
	// skips the first.
	LatencyRate float64
	// Stall is how long a measurement waits for its worker to be ready
	// or for a commit before it gives up with an error; 0 means 1 minute.
	Stall time.Duration
}

// defaultStall is Config.Stall's default.
const defaultStall = time.Minute

// Result is one bench run. Rates are per second.
type Result struct {
	RecordsPerSec       map[string]float64 `json:"records_per_sec"`
	NumbersPerSec       float64            `json:"numbers_per_sec"`
	WorkerVsPassthrough float64            `json:"worker_vs_passthrough"`
	WorkerVsPerRecord   float64            `json:"worker_vs_per_record"`
	NumbersVsLimit      float64            `json:"numbers_vs_limit"`
	PeakRSSBytes        int64              `json:"peak_rss_bytes"`
	P50Ms               float64            `json:"p50_ms"`
	P99Ms               float64            `json:"p99_ms"`
	LatencyRate         float64            `json:"latency_input_rate"`
	// Latency holds one entry per latency measurement: at
	// Config.LatencyRate, then at half the worker's throughput (the one
	// P50Ms, P99Ms and LatencyRate repeat).
	Latency     []Latency `json:"latency"`
	Pairs       []Pair    `json:"pairs"`
	RecordBytes int       `json:"record_bytes"`
	DurationSec float64   `json:"duration_sec"`
	Limit       int64     `json:"numbers_limit_per_sec"`
}

// Latency is one latency measurement: from an order's send to its numbered
// copy being visible to a read_committed consumer, at a fixed input rate,
// and the mean time of each phase of the worker's committed transactions
// (eos.Phases) over the same run.
type Latency struct {
	Rate    float64 `json:"rate"`
	Records int     `json:"records"`
	P50Ms   float64 `json:"p50_ms"`
	P90Ms   float64 `json:"p90_ms"`
	P99Ms   float64 `json:"p99_ms"`
	MaxMs   float64 `json:"max_ms"`
	// Sent is how many orders sent after the warm-up the broker
	// acknowledged, set by ExternalLatency only: Records below it are
	// copies that did not show within the grace, which the percentiles
	// leave out.
	Sent         int                `json:"sent,omitempty"`
	Transactions int64              `json:"transactions"`
	PhaseMeanMs  map[string]float64 `json:"phase_mean_ms"`
}

// Pair is one interleaved passthrough/worker measurement.
type Pair struct {
	Passthrough float64 `json:"passthrough"`
	Worker      float64 `json:"worker"`
	Ratio       float64 `json:"ratio"`
}

// Run measures everything, in this order: numbers alone, then
// passthrough and worker interleaved Pairs times (the ratio is the median
// of the pairwise ratios, since a shared machine drifts), then per_record,
// then latency at half the worker's throughput.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.Progress == nil {
		cfg.Progress = func(string) {}
	}
	if cfg.Loop.Logger == nil {
		cfg.Loop.Logger = slog.New(slog.DiscardHandler)
	}
	res := &Result{RecordsPerSec: map[string]float64{}, RecordBytes: cfg.RecordBytes, DurationSec: cfg.Duration.Seconds()}
	b := &runner{cfg: cfg, adm: nil}
	cl, err := kgo.NewClient(kgo.SeedBrokers(cfg.Loop.Brokers...))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	b.adm = kadm.NewClient(cl)

	cfg.Progress("numbers: reservations alone for one (server, worker) pair")
	g, err := cfg.NewNumberer()
	if err != nil {
		return nil, err
	}
	res.Limit = g.Layout().PerSecond()
	if res.NumbersPerSec, err = numbersPerSec(ctx, g, cfg.Duration); err != nil {
		return nil, err
	}
	res.NumbersVsLimit = res.NumbersPerSec / float64(res.Limit)

	if err := b.pairs(ctx, res); err != nil {
		return nil, err
	}
	if cfg.PairsOnly {
		res.PeakRSSBytes = PeakRSS()
		return res, nil
	}
	cfg.Progress("per_record: one Redis call and one synchronous produce per record")
	g, err = cfg.NewNumberer()
	if err != nil {
		return nil, err
	}
	if res.RecordsPerSec["per_record"], err = b.throughput(ctx, "per_record", g); err != nil {
		return nil, err
	}
	res.WorkerVsPerRecord = res.RecordsPerSec["worker"] / res.RecordsPerSec["per_record"]

	if err := b.latencies(ctx, res); err != nil {
		return nil, err
	}
	half := res.Latency[len(res.Latency)-1]
	res.LatencyRate, res.P50Ms, res.P99Ms = half.Rate, half.P50Ms, half.P99Ms
	res.PeakRSSBytes = PeakRSS()
	return res, nil
}

// pairs measures passthrough and worker interleaved cfg.Pairs times; the
// ratio is the median of the pairwise ratios, since a shared machine drifts.
func (b *runner) pairs(ctx context.Context, res *Result) error {
	cfg := b.cfg
	var pt, wk []float64
	for i := 0; i < cfg.Pairs; i++ {
		cfg.Progress(fmt.Sprintf("pair %d/%d: passthrough", i+1, cfg.Pairs))
		p, err := b.throughput(ctx, "passthrough", nil)
		if err != nil {
			return err
		}
		cfg.Progress(fmt.Sprintf("pair %d/%d: worker", i+1, cfg.Pairs))
		g, err := cfg.NewNumberer()
		if err != nil {
			return err
		}
		w, err := b.throughput(ctx, "worker", g)
		if err != nil {
			return err
		}
		pt, wk = append(pt, p), append(wk, w)
		res.Pairs = append(res.Pairs, Pair{Passthrough: p, Worker: w, Ratio: w / p})
	}
	ratios := make([]float64, len(res.Pairs))
	for i, p := range res.Pairs {
		ratios[i] = p.Ratio
	}
	res.RecordsPerSec["passthrough"], res.RecordsPerSec["worker"] = median(pt), median(wk)
	res.WorkerVsPassthrough = median(ratios)
	return nil
}

// latencies measures the latency at cfg.LatencyRate (if set) and at half
// the worker's throughput, in that order.
func (b *runner) latencies(ctx context.Context, res *Result) error {
	cfg := b.cfg
	rates := []float64{res.RecordsPerSec["worker"] / 2}
	if cfg.LatencyRate > 0 {
		rates = []float64{cfg.LatencyRate, rates[0]}
	}
	for _, rate := range rates {
		cfg.Progress(fmt.Sprintf("latency: end to end at %.0f records/s", rate))
		g, err := cfg.NewNumberer()
		if err != nil {
			return err
		}
		lat, err := b.latency(ctx, rate, g)
		if err != nil {
			return err
		}
		res.Latency = append(res.Latency, lat)
	}
	return nil
}

type runner struct {
	cfg Config
	adm *kadm.Client
	n   int
}

// topics creates a fresh input and output topic for one measurement. A
// retention of a few MiB per partition keeps an embedded broker's memory
// bounded however long the run; the producer stays close enough ahead of
// the worker that nothing it has not read is removed.
func (b *runner) topics(ctx context.Context, name string) (in, out string, cleanup func(), err error) {
	b.n++
	base := fmt.Sprintf("bench-%s-%d-%d", name, b.n, rand.Uint32())
	in, out = base, base+".out"
	// Small segments, so that retention can drop whole ones while the
	// run goes on.
	ret, seg := strconv.Itoa(4<<20), strconv.Itoa(1<<20)
	cfgs := map[string]*string{"retention.bytes": &ret, "segment.bytes": &seg}
	for _, t := range []string{in, out, base + ".dlq"} {
		if _, err := b.adm.CreateTopic(ctx, b.cfg.Partitions, -1, cfgs, t); err != nil {
			return "", "", nil, fmt.Errorf("create topic %s: %w", t, err)
		}
	}
	return in, out, func() {
		dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = b.adm.DeleteTopics(dctx, in, out, base+".dlq")
	}, nil
}

// stall is Config.Stall or its default.
func (b *runner) stall() time.Duration {
	if b.cfg.Stall > 0 {
		return b.cfg.Stall
	}
	return defaultStall
}

// feed produces order events to topic until ctx ends or stop is called, at
// most rate a second (0: as fast as the worker drains them), staying at
// most ahead records ahead of done(). Each record carries its send time in
// a header; acked, if not nil, is called with that time for every record
// the broker acknowledged. stop returns once every record produced is
// acknowledged or failed (for at most feedFlush), so that what acked
// counted is final.
func (b *runner) feed(ctx context.Context, topic string, rate float64, done func() int64, ahead int64, acked func(sentNs int64)) (func(), error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.cfg.Loop.Brokers...), kgo.ProducerLinger(2*time.Millisecond),
		kgo.MaxBufferedRecords(20000), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		return nil, err
	}
	// A pool of distinct events, reused: making them is not what is measured.
	pool := make([][]byte, 4096)
	for i := range pool {
		if b.cfg.Event != nil {
			pool[i] = b.cfg.Event(i)
		} else {
			pool[i] = orders.Event(i, orders.Clean, b.cfg.RecordBytes, 0)
		}
	}
	var sent int64
	fctx, cancel := context.WithCancel(ctx)
	// A paced feed's records are all delivered, however slowly the
	// client sends them: what it sent is what latency is accounted
	// against. An unpaced feed's backlog is dropped at stop.
	pctx := fctx
	if rate > 0 {
		pctx = ctx
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		start := time.Now()
		for i := 0; fctx.Err() == nil; i++ {
			if rate > 0 {
				if due := start.Add(time.Duration(float64(i) / rate * float64(time.Second))); time.Until(due) > 0 {
					time.Sleep(time.Until(due))
				}
			} else {
				for atomic.LoadInt64(&sent)-done() > ahead && fctx.Err() == nil {
					time.Sleep(200 * time.Microsecond)
				}
			}
			ns := time.Now().UnixNano()
			r := &kgo.Record{Topic: topic, Value: pool[i%len(pool)],
				Headers: []kgo.RecordHeader{{Key: "bench-sent", Value: strconv.AppendInt(nil, ns, 10)}}}
			cl.Produce(pctx, r, func(_ *kgo.Record, err error) {
				if err == nil && acked != nil {
					acked(ns)
				}
			})
			atomic.AddInt64(&sent, 1)
		}
	}()
	return func() {
		cancel()
		wg.Wait()
		// An unpaced feed's records still buffered fail with the
		// canceled context; every other record is acknowledged or failed
		// before Flush returns, which Close alone does not promise.
		fctx, cancel := context.WithTimeout(context.Background(), feedFlush)
		defer cancel()
		_ = cl.Flush(fctx)
		cl.Close()
	}, nil
}

// feedFlush bounds how long a feed's stop waits for its last records.
const feedFlush = 10 * time.Second

// settings are the loop's settings of a measurement that reads topic in:
// its own group and instance.
func (b *runner) settings(in string) eos.Config {
	s := b.cfg.Loop
	s.Topics, s.Group, s.InstanceID = []string{in}, in+"-g", in
	return s
}

// throughput runs name ("worker", or the baselines "passthrough" and
// "per_record") with numbers from g against a fed topic and returns the
// committed records per second over the measurement window, after a
// warm-up.
func (b *runner) throughput(ctx context.Context, name string, g *idgen.Generator) (float64, error) {
	in, out, cleanup, err := b.topics(ctx, name)
	if err != nil {
		return 0, err
	}
	defer cleanup()
	opts := append([]pipeline.Opt{pipeline.OutputTopic(out)}, b.cfg.Worker...)
	s := b.settings(in)
	var w measured
	switch name {
	case "worker":
		wk, err := pipeline.NewLanes(max(b.cfg.Lanes, 1), s, append(opts, pipeline.Numbers(g))...)
		if err != nil {
			return 0, err
		}
		w = workerRun{wk}
	case "per_record":
		w, err = newBaseline(g, s, opts...)
	default:
		w, err = newBaseline(nil, s, opts...)
	}
	if err != nil {
		return 0, err
	}
	done := w.In
	ctx = pprof.WithLabels(ctx, pprof.Labels("phase", name))
	pprof.SetGoroutineLabels(ctx)
	stopFeed, err := b.feed(ctx, in, 0, done, 200000, nil)
	if err != nil {
		return 0, err
	}
	defer stopFeed()
	// Every wait below ends as soon as the mode's loop stops, with the
	// loop's own error: a worker that failed at start is not waited for.
	ctx, stop := runMeasured(ctx, name, w.Run)
	defer stop()

	// The window runs from one commit to the first commit after the
	// window's length, so every mode is measured over whole transactions
	// (the origin's way commits rarely: its transactions are slow).
	window := b.cfg.Duration
	stall := b.stall()
	next := func(after int64) (int64, time.Time, error) {
		deadline := time.Now().Add(stall)
		for {
			if n := done(); n > after {
				return n, time.Now(), nil
			}
			if time.Now().After(deadline) {
				return 0, time.Time{}, fmt.Errorf("%s: nothing committed for %s", name, stall)
			}
			if eos.Sleep(ctx, time.Millisecond) != nil {
				return 0, time.Time{}, context.Cause(ctx)
			}
		}
	}
	if _, _, err := next(0); err != nil {
		return 0, err
	}
	if eos.Sleep(ctx, window/5) != nil { // warm-up
		return 0, context.Cause(ctx)
	}
	n0, t0, err := next(done())
	if err != nil {
		return 0, err
	}
	if eos.Sleep(ctx, window) != nil {
		return 0, context.Cause(ctx)
	}
	n1, t1, err := next(done())
	if err != nil {
		return 0, err
	}
	return float64(n1-n0) / t1.Sub(t0).Seconds(), nil
}

// errStopped is the cause of a measurement whose loop returned nil before
// the measurement ended.
var errStopped = errors.New("stopped before the measurement ended")

// runMeasured runs run (a mode's loop) until the returned stop is called,
// and returns a context that ends when run returns, with run's error (or
// errStopped), prefixed by name, as its cause; or when parent ends.
func runMeasured(parent context.Context, name string, run func(context.Context) error) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	wctx, stopRun := context.WithCancel(parent)
	done := make(chan struct{})
	go func() {
		defer close(done)
		err := run(wctx)
		if err == nil {
			err = errStopped
		}
		cancel(fmt.Errorf("%s: %w", name, err))
	}()
	return ctx, func() { stopRun(); <-done }
}

// latency feeds records at a fixed rate and measures, for every numbered
// record, the time from its send to when a read_committed consumer of the
// output sees it, after a warm-up of a fifth of the window.
func (b *runner) latency(ctx context.Context, rate float64, g *idgen.Generator) (Latency, error) {
	res := Latency{Rate: rate}
	in, out, cleanup, err := b.topics(ctx, "latency")
	if err != nil {
		return res, err
	}
	defer cleanup()
	reg := prometheus.NewRegistry()
	s := b.settings(in)
	s.Registerer = reg
	w, err := pipeline.NewLanes(max(b.cfg.Lanes, 1), s, append([]pipeline.Opt{pipeline.OutputTopic(out), pipeline.Numbers(g)},
		b.cfg.Worker...)...)
	if err != nil {
		return res, err
	}
	ctx, stop := runMeasured(ctx, "latency: worker", w.Run)
	defer stop()
	if !waitReady(ctx, w, b.stall()) {
		if ctx.Err() != nil {
			return res, context.Cause(ctx)
		}
		return res, fmt.Errorf("latency: worker never joined its group")
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(b.cfg.Loop.Brokers...), kgo.ConsumeTopics(out),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(10*time.Millisecond))
	if err != nil {
		return res, err
	}
	defer cons.Close()
	stopFeed, err := b.feed(ctx, in, rate, func() int64 { return 0 }, 0, nil)
	if err != nil {
		return res, err
	}
	defer stopFeed()
	var lat []float64
	deadline := time.Now().Add(b.cfg.Duration + b.cfg.Duration/5)
	skipUntil := time.Now().Add(b.cfg.Duration / 5)
	var before map[string]phaseTotal
	for time.Now().Before(deadline) {
		pctx, cancel := context.WithDeadline(ctx, deadline)
		fs := cons.PollFetches(pctx)
		cancel()
		now := time.Now()
		if before == nil && now.After(skipUntil) {
			before = phaseTotals(reg)
		}
		fs.EachRecord(func(r *kgo.Record) {
			for _, h := range r.Headers {
				if h.Key == "bench-sent" && now.After(skipUntil) {
					if ns, err := strconv.ParseInt(string(h.Value), 10, 64); err == nil {
						lat = append(lat, float64(now.UnixNano()-ns)/1e6)
					}
				}
			}
		})
		if ctx.Err() != nil {
			return res, context.Cause(ctx)
		}
	}
	if len(lat) == 0 {
		return res, fmt.Errorf("latency: no record came through")
	}
	sort.Float64s(lat)
	at := func(q float64) float64 { return lat[min(int(q*float64(len(lat))), len(lat)-1)] }
	res.Records, res.P50Ms, res.P90Ms, res.P99Ms, res.MaxMs = len(lat), at(0.5), at(0.9), at(0.99), lat[len(lat)-1]
	res.PhaseMeanMs = map[string]float64{}
	for phase, t := range phaseTotals(reg) {
		d := phaseTotal{n: t.n - before[phase].n, sum: t.sum - before[phase].sum}
		if d.n > 0 {
			res.PhaseMeanMs[phase] = d.sum / float64(d.n) * 1000
		}
		if phase == eos.PhasePoll {
			res.Transactions = int64(d.n)
		}
	}
	return res, nil
}

type phaseTotal struct {
	n   uint64
	sum float64
}

// phaseTotals reads the worker's phase histogram from reg, summed over
// its lanes.
func phaseTotals(reg *prometheus.Registry) map[string]phaseTotal {
	out := map[string]phaseTotal{}
	mfs, err := reg.Gather()
	if err != nil {
		return out
	}
	for _, mf := range mfs {
		if mf.GetName() != eos.PhaseMetricName {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "phase" {
					t := out[lp.GetValue()]
					t.n += m.GetHistogram().GetSampleCount()
					t.sum += m.GetHistogram().GetSampleSum()
					out[lp.GetValue()] = t
				}
			}
		}
	}
	return out
}

// waitReady waits up to bound for w to be ready.
func waitReady(ctx context.Context, w interface{ Ready() error }, bound time.Duration) bool {
	for deadline := time.Now().Add(bound); time.Now().Before(deadline); {
		if w.Ready() == nil {
			return true
		}
		if eos.Sleep(ctx, 100*time.Millisecond) != nil {
			return false
		}
	}
	return w.Ready() == nil
}

// numbersPerSec draws blocks of a full millisecond's capacity from one
// generator for d and returns numbers per second.
func numbersPerSec(ctx context.Context, g *idgen.Generator, d time.Duration) (float64, error) {
	block := int(g.Layout().PerMillisecond())
	buf := make([]int64, 0, block)
	var n int
	start := time.Now()
	for time.Since(start) < d {
		var err error
		if buf, err = g.AppendN(ctx, buf[:0], block); err != nil {
			return 0, err
		}
		n += len(buf)
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// PeakRSS returns the process's peak resident set size in bytes.
func PeakRSS() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Maxrss * 1024 // kilobytes on Linux
}

// Package faults_test is the end-to-end and fault suite: `flakestream run` as
// child processes, killed, scaled, and starved of Redis and of the broker
// while orders flow, with every run accounted for exactly (test/accounting)
// and its cost recorded (test/harness).
//
// It runs on whatever testenv.Kafka returns: in-process kfake by default
// (hermetic, part of `make test`), a real Apache Kafka broker with
// KAFKA_BROKERS=host:port or FLAKESTREAM_KAFKA_LOCAL=1 (`make test-kafka`).
// The broker-restart test needs a broker of its own: on kfake one that
// persists to disk, else one started by scripts/kafka-local.
//
// Knobs (environment):
//
//	FLAKESTREAM_ARTIFACTS=dir       results as JSON lines in dir/faults.jsonl,
//	                                worker logs in dir/logs/<test>/
//	FLAKESTREAM_FAULT_SCALE=x       multiply every record count by x (default
//	                                1 on a real broker, 0.2 on kfake)
//	FLAKESTREAM_FAULT_SEED=n        seed of the random kill times
package faults_test

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flakestream/flakestream/test/accounting"
	"github.com/flakestream/flakestream/test/harness"
	"github.com/flakestream/flakestream/test/testenv"
	"github.com/twmb/franz-go/pkg/kadm"
)

func TestMain(m *testing.M) { harness.Main(m) }

// newEnv returns a Kafka from testenv (restartable: a broker of the test's
// own), a Redis and topics of partitions partitions.
func newEnv(t *testing.T, partitions int32, restartable bool) *harness.Env {
	t.Helper()
	var k *testenv.KafkaCluster
	if restartable {
		k = testenv.Kafka(t, testenv.KafkaRestartable())
	} else {
		k = testenv.Kafka(t)
	}
	e := harness.NewEnv(t, k, testenv.RedisServer(t), partitions)
	harness.Binary(t) // built before the clock of the run starts
	t.Logf("kafka: %s at %v; redis: %s at %s; topics %s{,.out,.dlq} with %d partitions",
		k.Kind, k.Addrs, e.Redis.Kind, e.Redis.Addr, e.Input, partitions)
	return e
}

// scaled returns n times FLAKESTREAM_FAULT_SCALE (default 1 on a real
// broker, 0.2 on kfake, where the broker runs inside the race-instrumented
// test binary).
func scaled(e *harness.Env, n int) int {
	f := 1.0
	if !e.Kafka.Real() {
		f = 0.2
	}
	if s := os.Getenv("FLAKESTREAM_FAULT_SCALE"); s != "" {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || v <= 0 {
			panic("FLAKESTREAM_FAULT_SCALE: want a positive number, got " + s)
		}
		f = v
	}
	return max(int(float64(n)*f), 1000)
}

func seed(t *testing.T) uint64 {
	s := uint64(time.Now().UnixNano())
	if v := os.Getenv("FLAKESTREAM_FAULT_SEED"); v != "" {
		var err error
		if s, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("FLAKESTREAM_FAULT_SEED: %v", err)
		}
	}
	t.Logf("seed %d (FLAKESTREAM_FAULT_SEED=%d repeats the kill times)", s, s)
	return s
}

// command is how to run one test again on the kind of Kafka it ran on,
// with the same fault times.
func command(e *harness.Env, test string, seed uint64) string {
	env := ""
	if e.Kafka.Real() {
		env = "FLAKESTREAM_KAFKA_LOCAL=1 "
	}
	for _, k := range []string{"FLAKESTREAM_FAULT_SCALE", "FLAKESTREAM_FAULT_BROKER_KILL"} {
		if v := os.Getenv(k); v != "" {
			env += k + "=" + v + " "
		}
	}
	env += fmt.Sprintf("FLAKESTREAM_FAULT_SEED=%d ", seed)
	return env + "go test -count=1 -v -timeout 15m -run '^" + test + "$' ./test/faults/"
}

// pool runs named worker processes and restarts one that exits by itself,
// as an orchestrator would, counting such exits: a worker must survive
// every fault here, so an exit is a finding even if the output stays
// exactly once.
type pool struct {
	t    *testing.T
	e    *harness.Env
	args []string

	mu      sync.Mutex
	workers map[string]*harness.Process
	own     map[string]workerSetup // an instance's own arguments and environment (startWith)
	exits   int
	closed  bool
	wg      sync.WaitGroup
}

func newPool(t *testing.T, e *harness.Env, args ...string) *pool {
	p := &pool{t: t, e: e, args: args, workers: map[string]*harness.Process{}, own: map[string]workerSetup{}}
	t.Cleanup(p.close)
	return p
}

// workerSetup is what one instance runs with beyond the pool's arguments.
type workerSetup struct {
	env, args []string
}

// start starts instance and watches it.
func (p *pool) start(instance string) {
	p.t.Helper()
	p.startWith(instance, workerSetup{})
}

// startWith starts instance with its own arguments (after the pool's) and
// environment, which a restart after an exit keeps.
func (p *pool) startWith(instance string, own workerSetup) {
	p.t.Helper()
	w := p.e.StartWorkerEnv(p.t, instance, own.env, append(p.args[:len(p.args):len(p.args)], own.args...)...)
	// Cleanups run last-in first-out: this one, registered after the
	// process's own (which kills it), runs first, so that the watcher does
	// not take that kill for a crash.
	p.t.Cleanup(p.markClosed)
	p.mu.Lock()
	p.workers[instance] = w
	p.own[instance] = own
	p.mu.Unlock()
	p.wg.Add(1)
	go p.watch(instance, w)
}

func (p *pool) markClosed() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
}

func (p *pool) watch(instance string, w *harness.Process) {
	defer p.wg.Done()
	<-w.Done
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.workers[instance] != w {
		return // stopped or killed on purpose
	}
	p.exits++
	p.t.Logf("worker %s exited by itself (%v); restarting it. Its log ends:\n%s", instance, w.Err, harness.Tail(w.Stderr.String(), 2000))
	own := p.own[instance]
	nw := p.e.StartWorkerEnv(p.t, instance, own.env, append(p.args[:len(p.args):len(p.args)], own.args...)...)
	p.workers[instance] = nw
	p.wg.Add(1)
	go p.watch(instance, nw)
}

// pid returns the process id of instance (0 if it does not run).
func (p *pool) pid(instance string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if w := p.workers[instance]; w != nil {
		return w.Cmd.Process.Pid
	}
	return 0
}

// kill kills instance with SIGKILL (no restart).
func (p *pool) kill(instance string) {
	p.mu.Lock()
	w := p.workers[instance]
	delete(p.workers, instance)
	p.mu.Unlock()
	if w != nil {
		w.Kill()
	}
}

// stop stops instance with SIGTERM: it ends its transaction and leaves the
// group. A shutdown over 30s or a non-zero exit fails the test.
func (p *pool) stop(instance string) {
	p.t.Helper()
	p.mu.Lock()
	w := p.workers[instance]
	delete(p.workers, instance)
	p.mu.Unlock()
	if w == nil {
		return
	}
	if err := w.Stop(30 * time.Second); err != nil {
		p.t.Errorf("%v\n%s", err, harness.Tail(w.Stderr.String(), 2000))
	}
}

// stopAll stops every worker with SIGTERM.
func (p *pool) stopAll() {
	p.t.Helper()
	p.mu.Lock()
	names := make([]string, 0, len(p.workers))
	for n := range p.workers {
		names = append(names, n)
	}
	p.mu.Unlock()
	for _, n := range names {
		p.stop(n)
	}
}

func (p *pool) close() {
	p.mu.Lock()
	p.closed = true
	ws := p.workers
	p.workers = map[string]*harness.Process{}
	p.mu.Unlock()
	for _, w := range ws {
		w.Kill()
	}
	p.wg.Wait()
}

// sessionBegun is what franz-go logs (at debug, which the test/faults workers
// run at) each time a group member's join and sync are done.
const sessionBegun = "kafka: new group session begun"

// sessions counts the group sessions instance's current process has begun.
func (p *pool) sessions(instance string) int {
	p.mu.Lock()
	w := p.workers[instance]
	p.mu.Unlock()
	if w == nil {
		return 0
	}
	return strings.Count(w.Stderr.String(), sessionBegun)
}

func (p *pool) exitCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exits
}

// run is one fault run: a monitor, a stream, workers, and at the end the
// exact accounting and the result line.
type run struct {
	t      *testing.T
	e      *harness.Env
	m      *harness.Monitor
	s      *harness.Stream
	p      *pool
	start  time.Time
	result harness.Result
	rng    *rand.Rand

	// also, if set, checks more after the accounting (its failures make
	// the result not ok) before the result is recorded.
	also func(rep accounting.Report) bool
	// beforeStop, if set, runs once the accounting is done, while the
	// workers still run (to read their metrics); beforeRecord, if set,
	// after also, just before the result is recorded.
	beforeStop, beforeRecord func()
	// timeline is the file in the log dir the monitor's samples go to;
	// runs side by side in one test each name their own. Default
	// timeline.csv.
	timeline string
}

func begin(t *testing.T, e *harness.Env, fault, setup string, workerArgs ...string) *run {
	r := &run{t: t, e: e, m: e.StartMonitor(t), p: newPool(t, e, workerArgs...), start: time.Now()}
	s := seed(t)
	r.rng = rand.New(rand.NewPCG(s, s))
	r.result = harness.Result{Fault: fault, Kafka: e.Kafka.Kind, Command: command(e, t.Name(), s),
		Setup: setup + "; worker flags: " + strings.Join(workerArgs, " "), Extra: map[string]any{"seed": s}}
	return r
}

// stream starts writing the orders.
func (r *run) stream(cfg harness.StreamConfig) {
	r.result.Setup += "; " + cfg.String()
	r.s = r.e.StartStream(r.t, cfg)
}

// waitCommittedPast waits until the workers' committed count is above
// count (and a first sample exists), or bound passes; the run's accounting
// judges the outcome either way.
func (r *run) waitCommittedPast(count int64, bound time.Duration) {
	deadline := time.Now().Add(bound)
	for r.m.Committed() <= count && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
}

// waitWorking waits until instance's current process works: each of its
// lanes has joined the group and synced (its own log says so), and the
// committed count has moved since then, which only that process can have
// done. It fails the test after bound.
//
// The committed count alone does not show it: the process killed before
// may have sent its last EndTxn just before it died, and that commit can
// land after the restart; a test that took it for the new process's would
// kill the new process while it still waits in JoinGroup.
func (r *run) waitWorking(instance string, lanes int, bound time.Duration) {
	r.t.Helper()
	deadline := time.Now().Add(bound)
	for r.p.sessions(instance) < lanes {
		if time.Now().After(deadline) {
			r.t.Fatalf("worker %s: %d of %d lanes joined the group within %s", instance, r.p.sessions(instance), lanes, bound)
		}
		time.Sleep(100 * time.Millisecond)
	}
	joined := time.Now()
	for {
		if base, ok := r.m.CommittedSince(joined); ok && r.m.Committed() > base {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("worker %s joined the group but committed nothing within %s", instance, bound)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// sleepUntil sleeps until d after the run began.
func (r *run) sleepUntil(d time.Duration) {
	time.Sleep(time.Until(r.start.Add(d)))
}

// finish waits for the stream and the workers to commit everything, checks
// the output exactly, records the result, and fails the test if the run was
// not exactly once or a worker exited by itself.
func (r *run) finish(bound time.Duration) {
	t := r.t
	t.Helper()
	deadline := r.start.Add(bound)
	if r.s != nil { // else the test wrote its own inputs
		r.s.Wait(t, time.Until(deadline))
	}
	committed, ok := r.e.WaitCommitted(t, max(time.Until(deadline), 30*time.Second))
	r.result.DurationS = float64(int(time.Since(r.start).Seconds()*100)) / 100
	r.m.Stop()
	if !ok {
		t.Errorf("the workers committed %d of %d input records within %s", committed, len(r.e.Inputs()), bound)
	}
	checkFor := 2 * time.Minute
	if !ok {
		checkFor = 20 * time.Second // what is missing will not come; account for what is there
	}
	rep := r.e.Check(t, checkFor)
	if r.beforeStop != nil {
		r.beforeStop()
	}
	r.p.stopAll()
	r.result.SetReport(rep)
	r.crossCheck(rep)
	r.result.SetTimeline(r.m, r.start)
	if err := r.m.WriteCSV(filepath.Join(r.e.LogDir(), cmp.Or(r.timeline, "timeline.csv"))); err != nil {
		t.Errorf("timeline: %v", err)
	}
	r.result.WorkerExits = r.p.exitCount()
	if r.result.WorkerExits > 0 {
		r.result.OK = false
	}
	if r.also != nil && !r.also(rep) {
		r.result.OK = false
	}
	if r.beforeRecord != nil {
		r.beforeRecord()
	}
	harness.Record(t, r.result)
	if !rep.OK() {
		t.Fatalf("not exactly once: %s", rep)
	}
	t.Logf("exactly once: %s", rep)
	if r.result.WorkerExits > 0 {
		t.Fatalf("%d worker(s) exited by themselves during the run (logs above and in %s)", r.result.WorkerExits, r.e.LogDir())
	}
}

// crossCheck runs `flakestream verify` on the run's topics and makes the
// result not ok, and the test fail, unless it agrees with the suite's own
// accounting: the product's reconciliation is checked on every row.
func (r *run) crossCheck(rep accounting.Report) {
	c, err := r.e.VerifyProcess(r.t, 5*time.Minute)
	if err != nil {
		r.t.Errorf("flakestream verify: %v", err)
		r.result.OK = false
		return
	}
	if r.result.Extra == nil {
		r.result.Extra = map[string]any{}
	}
	r.result.Extra["verify"] = c.Counts
	if d := harness.Disagreements(c.Counts, rep); len(d) > 0 {
		r.t.Errorf("flakestream verify disagrees with the suite's accounting: %s; its faults: %+v", strings.Join(d, "; "), c.Faults)
		r.result.OK = false
		return
	}
	r.t.Logf("flakestream verify agrees: exact=%t input=%d lost=%d duplicated=%d renumbered=%d", c.Exact, c.Input, c.Lost, c.Duplicated, c.Renumbered)
}

// spread returns k random moments inside [from, to), one in each of k equal
// slices, away from the slices' edges, so that faults are random but never
// on top of each other.
func (r *run) spread(k int, from, to time.Duration) []time.Duration {
	out := make([]time.Duration, k)
	slice := (to - from) / time.Duration(k)
	for i := range out {
		out[i] = from + time.Duration(i)*slice + time.Duration((0.15+0.7*r.rng.Float64())*float64(slice))
	}
	return out
}

func fmtDur(d time.Duration) string { return fmt.Sprintf("%.1fs", d.Seconds()) }

// waitGroupCommitted waits until group has committed want records of topic
// (summed over its partitions) and returns what it committed.
func waitGroupCommitted(t *testing.T, e *harness.Env, group, topic string, want int64, timeout time.Duration) (int64, bool) {
	t.Helper()
	adm := e.Kafka.Admin(t)
	var done int64
	ok := accounting.WaitFor(timeout, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		offs, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			return false
		}
		done = 0
		offs.Each(func(o kadm.OffsetResponse) {
			if o.Topic == topic && o.At > 0 {
				done += o.At
			}
		})
		return done >= want
	})
	return done, ok
}

package faults_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flakestream/flakestream/internal/orders"
	"github.com/flakestream/flakestream/test/harness"
	"github.com/flakestream/flakestream/test/testenv"
)

// streamRate is the orders per second the stream writes during a fault
// run: below what one worker sustains on a 2-core machine next to the broker,
// so that a worker keeps up and every stall is the fault's.
func streamRate(e *harness.Env) int {
	if e.Kafka.Real() {
		return 20000
	}
	return 5000
}

// The baseline: the same stream and worker with no fault, so that the
// stalls of the fault runs can be read against a healthy worker's pace.
func TestFaultNone(t *testing.T) {
	e := newEnv(t, 4, false)
	n := scaled(e, 150000)
	rate := streamRate(e)
	r := begin(t, e, "none (baseline)", "1 worker, 4 partitions", "--max-poll-records", "5000")
	r.p.start("a")
	r.stream(harness.StreamConfig{Records: n, Rate: rate, Mix: orders.Mix{BadPerMille: 2, NumberedPerMille: 2}})
	r.finish(time.Duration(float64(n)/float64(rate)*float64(time.Second)) + 2*time.Minute)
}

// a. The worker is killed with SIGKILL three times at random moments while
// the stream flows, and restarted at once under the same --instance-id.
// Its restart fences the dead transaction (same transactional ID). With
// static membership it also takes its partitions back at once; with
// dynamic membership the group first waits for the dead member's session
// (--session-timeout 6s) to expire.
//
// The lanes row kills a worker of two lanes (--lanes 2): two group members
// and two transactional IDs die at once, and both come back with the
// restart.
func TestFaultCrashes(t *testing.T) {
	t.Run("static", func(t *testing.T) { testCrashes(t, true, 1) })
	t.Run("dynamic", func(t *testing.T) { testCrashes(t, false, 1) })
	t.Run("lanes", func(t *testing.T) { testCrashes(t, true, 2) })
}

func testCrashes(t *testing.T, static bool, lanes int) {
	e := newEnv(t, 4, false)
	n := scaled(e, 500000)
	rate := streamRate(e)
	args := []string{"--max-poll-records", "5000", "--session-timeout", "6s", "--lanes", fmt.Sprint(lanes)}
	mode := "--static-membership"
	if static {
		args = append(args, "--static-membership")
	} else {
		mode = "dynamic membership"
	}
	setup := "1 worker, 4 partitions"
	if lanes > 1 {
		mode += fmt.Sprintf(", --lanes %d", lanes)
		setup = fmt.Sprintf("1 worker of %d lanes, 4 partitions", lanes)
	}
	r := begin(t, e, "crash: SIGKILL x3, restart ("+mode+")", setup, args...)
	r.p.start("crashy")
	r.stream(harness.StreamConfig{Records: n, Rate: rate, Mix: orders.Mix{BadPerMille: 2, NumberedPerMille: 2}})
	flow := time.Duration(float64(n) / float64(rate) * float64(time.Second))
	r.crashes(3, "crashy", lanes, flow, n)
	r.finish(flow + 2*time.Minute)
}

// crashes kills instance (of lanes lanes) with SIGKILL k times while the
// stream of n orders flows for flow, at random moments, and restarts it at
// once under the same --instance-id.
func (r *run) crashes(k int, instance string, lanes int, flow time.Duration, n int) {
	r.t.Helper()
	for i, at := range r.spread(k, flow/10, flow) {
		r.sleepUntil(at)
		// Each kill hits a worker that works: the one restarted before
		// has joined the group and committed since. A worker killed while
		// its JoinGroup waits is a fault of another kind, and one kfake
		// gets wrong: half the time the dead joiner is kept in the group
		// with no session timer, and when it is not the leader nothing
		// ever removes it, so its share of the partitions never moves
		// again (Apache Kafka expires it one session timeout after the
		// join completes). test/kfakerepro reproduces it.
		r.waitWorking(instance, lanes, 90*time.Second)
		f := r.m.Begin(fmt.Sprintf("SIGKILL %d, restart", i+1))
		r.p.kill(instance)
		r.p.start(instance)
		r.m.End(f)
		r.t.Logf("killed and restarted the worker at %s (%d of %d orders written)", fmtDur(time.Since(r.start)), r.s.Acked(), n)
	}
}

// A rolling upgrade of the lane count, both ways, mid-stream: a worker of
// one lane (the default before --lanes auto) is killed and replaced under
// the same --instance-id by a default worker (--lanes auto, with
// GOMAXPROCS=2 so that auto picks two lanes on any machine: 4
// partitions), which is killed in turn and replaced by a worker of one
// lane again. Lane 0 keeps the one-lane worker's transactional ID, so its
// start fences what the killed one-lane worker left open; after the
// downgrade, the new process ends what the gone lane 1 left open
// (pipeline.RetiredLanes) instead of leaving it to --txn-timeout.
func TestFaultLaneUpgrade(t *testing.T) {
	e := newEnv(t, 4, false)
	n := scaled(e, 300000)
	rate := streamRate(e)
	one := workerSetup{args: []string{"--lanes", "1"}}
	auto := workerSetup{env: []string{"GOMAXPROCS=2"}, args: []string{"--lanes", "auto"}}
	r := begin(t, e, "lanes: 1 -> default (auto, 2) -> 1, SIGKILL at each change", "1 worker, 4 partitions, GOMAXPROCS=2 for auto",
		"--max-poll-records", "5000", "--session-timeout", "6s", "--static-membership")
	r.p.startWith("u", one)
	r.stream(harness.StreamConfig{Records: n, Rate: rate, Mix: orders.Mix{BadPerMille: 2, NumberedPerMille: 2}})
	flow := time.Duration(float64(n) / float64(rate) * float64(time.Second))
	at := r.spread(2, flow/5, flow*4/5)
	for i, step := range []struct {
		from  int
		to    workerSetup
		label string
	}{{1, auto, "SIGKILL the one-lane worker, start a default (auto) one"}, {2, one, "SIGKILL the two-lane worker, start a one-lane one"}} {
		r.sleepUntil(at[i])
		r.waitWorking("u", step.from, 90*time.Second)
		f := r.m.Begin(step.label)
		r.p.kill("u")
		r.p.startWith("u", step.to)
		r.m.End(f)
		t.Logf("%s at %s (%d of %d orders written)", step.label, fmtDur(time.Since(r.start)), r.s.Acked(), n)
	}
	r.finish(flow + 2*time.Minute)
}

// b. Workers join and leave while the stream flows: one, then two, then
// three, then one again (the two others leave with SIGTERM, ending their
// transactions and leaving the group). Every change is a rebalance that
// aborts the open transactions.
func TestFaultMembership(t *testing.T) {
	e := newEnv(t, 6, false)
	n := scaled(e, 200000)
	rate := streamRate(e)
	args := []string{"--max-poll-records", "5000", "--session-timeout", "6s"}
	r := begin(t, e, "membership: 1 -> 2 -> 3 -> 1 workers", "workers a, b, c, 6 partitions", args...)
	r.p.start("a")
	r.stream(harness.StreamConfig{Records: n, Rate: rate, Mix: orders.Mix{BadPerMille: 2, NumberedPerMille: 2}})
	flow := time.Duration(float64(n) / float64(rate) * float64(time.Second))
	at := r.spread(3, flow/10, flow*9/10)

	r.sleepUntil(at[0])
	r.m.Instant("b joins (2 workers)")
	r.p.start("b")
	r.sleepUntil(at[1])
	r.m.Instant("c joins (3 workers)")
	r.p.start("c")
	r.sleepUntil(at[2])
	f := r.m.Begin("b and c leave (1 worker)")
	done := make(chan struct{})
	go func() { defer close(done); r.p.stop("c") }()
	r.p.stop("b")
	<-done
	r.m.End(f)
	r.finish(flow + 2*time.Minute)
}

// c. Redis is stopped for 5 s while the stream flows, then started again on
// the same port and data (append-only file). The worker aborts what it
// cannot number, retries with backoff, and resumes by itself.
func TestFaultRedisOutage(t *testing.T) {
	e := newEnv(t, 4, false)
	if !e.Redis.CanRestart() {
		testenv.Missing(t, "the Redis outage needs a redis-server this test starts (unset REDIS_URL)")
	}
	n := scaled(e, 150000)
	rate := streamRate(e)
	args := []string{"--max-poll-records", "5000"}
	r := begin(t, e, "Redis down for 5 s", "1 worker, 4 partitions", args...)
	r.p.start("a")
	r.stream(harness.StreamConfig{Records: n, Rate: rate, Mix: orders.Mix{BadPerMille: 2, NumberedPerMille: 2}})
	flow := time.Duration(float64(n) / float64(rate) * float64(time.Second))
	r.sleepUntil(r.spread(1, flow/4, flow/2)[0])
	f := r.m.Begin("Redis stopped for 5s")
	e.Redis.Stop(t)
	time.Sleep(5 * time.Second)
	e.Redis.Start(t)
	r.m.End(f)
	r.finish(flow + 2*time.Minute)
}

// d. The broker is stopped and started again (same address, same data)
// while the stream flows: cleanly (SIGTERM), and killed (SIGKILL of the
// JVM, an unclean shutdown that recovers its logs at start). The stream's
// producer and the worker retry until it is back.
func TestFaultBrokerRestart(t *testing.T) {
	t.Run("clean", func(t *testing.T) { testBrokerRestart(t, false) })
	t.Run("killed", func(t *testing.T) { testBrokerRestart(t, true) })
}

// brokerKillByDefault makes the killed subtest of TestFaultBrokerRestart
// run by default (FLAKESTREAM_FAULT_BROKER_KILL=0 still skips it). It runs
// since the orphaned-transaction guard (issue 11, --orphan-guard) is in the
// worker: without it, on Kafka 4.4.0 (transactions v2) a broker killed with
// SIGKILL can lose the ABORT marker of the transaction it was in, so the
// next commit exposes aborted records (duplicates); see docs/fault-results.md.
const brokerKillByDefault = true

// brokerKillEnabled reports whether the killed subtest runs:
// FLAKESTREAM_FAULT_BROKER_KILL=1 runs it, =0 skips it, unset follows
// brokerKillByDefault.
func brokerKillEnabled() bool {
	switch os.Getenv("FLAKESTREAM_FAULT_BROKER_KILL") {
	case "1":
		return true
	case "0":
		return false
	}
	return brokerKillByDefault
}

func testBrokerRestart(t *testing.T, kill bool) {
	if kill && !brokerKillEnabled() {
		t.Skip("set FLAKESTREAM_FAULT_BROKER_KILL=1: on Kafka 4.4.0 (transactions v2) a broker killed with SIGKILL can lose the ABORT " +
			"marker of the transaction it was in, so the next commit exposes aborted records (duplicates); see docs/fault-results.md")
	}
	e := newEnv(t, 4, true)
	keepEvidence(t, e)
	n := scaled(e, 150000)
	rate := streamRate(e)
	args := []string{"--max-poll-records", "5000"}
	if v := os.Getenv("FLAKESTREAM_ORPHAN_GUARD"); v != "" {
		args = append(args, "--orphan-guard="+v)
	}
	fault, how := "broker restart (SIGTERM, start)", "stopped (SIGTERM)"
	if kill {
		fault, how = "broker killed (SIGKILL, start)", "killed (SIGKILL)"
	}
	if kill && !e.Kafka.Real() {
		t.Skip("kfake has no unclean crash: its Kill is Stop, which the clean subtest covers")
	}
	r := begin(t, e, fault, "1 worker, 4 partitions, the broker "+how+" and started", args...)
	r.p.start("a")
	r.stream(harness.StreamConfig{Records: n, Rate: rate, Mix: orders.Mix{BadPerMille: 2, NumberedPerMille: 2}})
	flow := time.Duration(float64(n) / float64(rate) * float64(time.Second))
	r.sleepUntil(r.spread(1, flow/4, flow/2)[0])
	f := r.m.Begin("broker " + how + " and started")
	if kill {
		e.Kafka.Kill(t)
	} else {
		e.Kafka.Stop(t)
	}
	e.Kafka.Start(t)
	r.m.End(f)
	t.Logf("broker back after %s", fmtDur(f.Restored.Sub(f.At)))
	r.finish(flow + 2*time.Minute)
}

// e. 1% bad input of every dead-letter class mixed into the stream: every
// bad record lands in the DLQ in the transaction that commits its offset,
// with its class, and the good ones around it are numbered.
func TestFaultBadInput(t *testing.T) {
	e := newEnv(t, 4, false)
	n := scaled(e, 150000)
	rate := streamRate(e)
	args := []string{"--max-poll-records", "5000"}
	mix := orders.Mix{BadPerMille: 10}
	r := begin(t, e, "bad input: 1% of every DLQ class", "1 worker, 4 partitions, --max-record-bytes 65536", args...)
	r.p.start("a")
	r.stream(harness.StreamConfig{Records: n, Rate: rate, Mix: mix})
	r.finish(time.Duration(float64(n)/float64(rate)*float64(time.Second)) + 2*time.Minute)

	want := map[string]int{}
	for i := range n {
		if c := mix.KindOf(i).Class(); c != "" {
			want[c]++
		}
	}
	got := e.DLQClasses(t)
	for _, k := range orders.BadKinds {
		if got[k.Class()] != want[k.Class()] || want[k.Class()] == 0 {
			t.Errorf("dead letters of class %s: %d, want %d", k.Class(), got[k.Class()], want[k.Class()])
		}
	}
	if len(got) != len(want) {
		t.Errorf("dead-letter classes %v, want %v", got, want)
	}
	t.Logf("dead letters by class: %v", got)
}

// keepEvidence copies the broker's data dir (its logs, __transaction_state
// and kafka-local.out) to $FLAKESTREAM_FAULT_KEEP/<test>-<time> when the test
// fails, before the cleanups stop the broker and remove the dir, so that a
// rare failure can be examined with kafka-dump-log afterwards.
func keepEvidence(t *testing.T, e *harness.Env) {
	keep := os.Getenv("FLAKESTREAM_FAULT_KEEP")
	src := e.Kafka.DataDir()
	if keep == "" || src == "" {
		return
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		dst := filepath.Join(keep, strings.ReplaceAll(t.Name(), "/", "_")+"-"+time.Now().Format("150405"))
		if err := os.MkdirAll(dst, 0o755); err != nil {
			t.Logf("keep evidence: %v", err)
			return
		}
		out, err := exec.Command("cp", "-a", src+"/.", dst).CombinedOutput()
		t.Logf("broker data dir kept in %s (%v) %s", dst, err, out)
	})
}

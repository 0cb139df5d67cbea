package faults_test

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flakestream/flakestream/internal/orders"
	"github.com/flakestream/flakestream/test/accounting"
	"github.com/flakestream/flakestream/test/harness"
	"github.com/flakestream/flakestream/test/testenv"
)

// Faults that hang instead of crash (issue 19): packets dropped on
// loopback (iptables DROP, so a connection gets no reset and hangs until a
// timeout notices) and processes paused with SIGSTOP (a GC pause, a frozen
// VM), then healed or resumed. No worker may exit because of any of them,
// and every run is accounted for exactly, like the crash faults.
//
// The workers run with --txn-timeout 5s (WorkerArgs) and, here,
// --session-timeout 6s, so that a hang of 12 s outlasts both: the broker
// times out the open transaction (bumping the producer's epoch) and the
// group drops the member, and the worker must find out and start again.

// hangArgs are the worker flags of the hang rows.
var hangArgs = []string{"--max-poll-records", "5000", "--session-timeout", "6s"}

// hangRate and hangOrders keep a hang row to about 30 s of writing: the
// fault starts 5 to 8 s in and lasts 10 to 15 s, so that the stream still
// flows when it ends and the recovery is measured on new input.
const (
	hangRate   = 10000
	hangOrders = 300000
)

// hangFlow starts the stream of a hang row and returns how long it writes.
func (r *run) hangFlow() time.Duration {
	n := scaled(r.e, hangOrders)
	r.stream(harness.StreamConfig{Records: n, Rate: hangRate, Mix: orders.Mix{BadPerMille: 2, NumberedPerMille: 2}})
	return time.Duration(float64(n) / hangRate * float64(time.Second))
}

// faultAt sleeps until a random moment 5 to 8 s into the run, and then
// until the workers have committed something: on a loaded machine a first
// session can take longer than that, and a hang that hits a worker still
// starting measures its start, not the fault.
func (r *run) faultAt() {
	r.sleepUntil(5*time.Second + time.Duration(r.rng.Float64()*float64(3*time.Second)))
	r.waitCommittedPast(0, 90*time.Second)
}

// skipOnKfake skips a hang row on kfake: the rows run once in CI, in
// make test-kafka, on a real broker (the broker's own rows could not run
// on kfake anyway: it lives inside the test process).
func skipOnKfake(t *testing.T, k *testenv.KafkaCluster) {
	t.Helper()
	if !k.Real() {
		t.Skip("the hang rows run on a real broker (FLAKESTREAM_KAFKA_LOCAL=1, make test-kafka)")
	}
}

// newHangEnv is newEnv for a hang row: a real broker (shared, or the
// test's own if restartable), skipping on kfake.
func newHangEnv(t *testing.T, restartable bool) *harness.Env {
	t.Helper()
	if !testenvRealWanted() {
		t.Skip("the hang rows run on a real broker (FLAKESTREAM_KAFKA_LOCAL=1, make test-kafka)")
	}
	e := newEnv(t, 4, restartable)
	skipOnKfake(t, e.Kafka)
	return e
}

// testenvRealWanted reports whether testenv.Kafka gives a real broker here,
// so that a hang row skips before it starts anything.
func testenvRealWanted() bool {
	return os.Getenv("KAFKA_BROKERS") != "" || os.Getenv("FLAKESTREAM_KAFKA_LOCAL") == "1"
}

// newPartitionEnv is a broker of the test's own with a second client
// listener, which the workers bootstrap from (Env.WorkerArgs): dropping its
// port cuts off the workers while the stream, the monitor and the
// accounting keep the broker's main listener.
func newPartitionEnv(t *testing.T) *harness.Env {
	t.Helper()
	testenv.NeedNetFaults(t)
	if !testenvRealWanted() {
		t.Skip("the hang rows run on a real broker (FLAKESTREAM_KAFKA_LOCAL=1, make test-kafka)")
	}
	k := testenv.Kafka(t, testenv.KafkaRestartable(), testenv.KafkaClientListener())
	skipOnKfake(t, k)
	e := harness.NewEnv(t, k, testenv.RedisServer(t), 4)
	harness.Binary(t)
	t.Logf("kafka: %s at %v, workers at %v; redis: %s at %s", k.Kind, k.Addrs, k.ClientAddrs, e.Redis.Kind, e.Redis.Addr)
	return e
}

// port returns the port of a host:port address.
func port(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// partition drops the ports for d, as fault name on the timeline.
func (r *run) partition(name string, d time.Duration, ports ...int) {
	r.t.Helper()
	f := r.m.Begin(name)
	cut := testenv.DropPorts(r.t, name, ports...)
	time.Sleep(d)
	cut.Heal(r.t)
	r.m.End(f)
	r.t.Logf("%s at %s for %s (%d orders written by its end)", name, fmtDur(f.At.Sub(r.start)), fmtDur(d), r.s.Acked())
}

// pause stops pid with SIGSTOP for d, as fault name on the timeline.
func (r *run) pause(name string, pid int, d time.Duration) {
	r.t.Helper()
	f := r.m.Begin(name)
	testenv.PauseFor(r.t, name, pid, d)
	r.m.End(f)
	r.t.Logf("%s at %s for %s (%d orders written by its end)", name, fmtDur(f.At.Sub(r.start)), fmtDur(d), r.s.Acked())
}

// fenceEvidence counts, in the workers' logs, the lines that show a hang
// was noticed: a session replaced, a fenced or timed-out producer. It goes
// into the result (extra.log_*) so the table's reader can see that the
// fault did what it is meant to do.
func (r *run) fenceEvidence() {
	// Only what the workers logged from the first fault on: a start-up
	// retry is not the fault's doing.
	var from string
	if fs := r.m.Faults(); len(fs) > 0 {
		from = "time=" + fs[0].At.UTC().Format("2006-01-02T15:04:05.000Z")
	}
	var logs strings.Builder
	files, _ := filepath.Glob(filepath.Join(r.e.LogDir(), "*.log"))
	for _, f := range files {
		b, _ := os.ReadFile(f)
		for _, line := range strings.Split(string(b), "\n") {
			// slog's text lines begin with time=<RFC 3339, ms, UTC>,
			// which sorts as text.
			if strings.HasPrefix(line, "time=") && line >= from {
				logs.WriteString(line + "\n")
			}
		}
	}
	for key, s := range map[string]string{
		"log_session_replaced": "must be restarted",
		"log_rebalance_aborts": "aborted by a rebalance",
		"log_producer_fenced":  "PRODUCER_FENCED",
		"log_invalid_epoch":    "INVALID_PRODUCER_EPOCH",
	} {
		r.result.Extra[key] = strings.Count(logs.String(), s)
	}
	r.t.Logf("worker logs: %v", r.result.Extra)
}

// a. The workers cut off from the broker's client port (their listener) for
// 12 s, more than --txn-timeout 5s and --session-timeout 6s, while the
// broker runs: it times out the open transaction (aborting it and bumping
// the producer epoch) and drops the member from the group. When the packets
// flow again, the worker finds its producer fenced and its membership gone,
// replaces its session and rejoins, without exiting.
func TestFaultPartitionBroker(t *testing.T) {
	e := newPartitionEnv(t)
	r := begin(t, e, "partition: workers cut off from the broker 12 s", "1 worker, 4 partitions, the workers' listener dropped (iptables)", hangArgs...)
	r.p.start("a")
	flow := r.hangFlow()
	r.faultAt()
	r.partition("workers' broker port dropped 12s", 12*time.Second, port(t, e.Kafka.ClientAddrs[0]))
	r.also = func(accounting.Report) bool { r.fenceEvidence(); return true }
	r.finish(flow + 2*time.Minute)
}

// b. The workers cut off from Redis for 15 s: every reservation hangs until
// the client's read timeout, the batch aborts, and the worker retries with
// backoff until Redis answers again.
func TestFaultPartitionRedis(t *testing.T) {
	testenv.NeedNetFaults(t)
	e := newHangEnv(t, false)
	r := begin(t, e, "partition: workers cut off from Redis 15 s", "1 worker, 4 partitions, Redis's port dropped (iptables)", hangArgs...)
	r.p.start("a")
	flow := r.hangFlow()
	r.faultAt()
	r.partition("Redis port dropped 15s", 15*time.Second, port(t, e.Redis.Addr))
	r.finish(flow + 2*time.Minute)
}

// e. A worker paused (SIGSTOP) for 15 s, past --session-timeout 6s and
// --txn-timeout 5s, while another member runs: the group gives its
// partitions to the other worker, and the broker times out the paused
// one's transaction (an abort, and a new producer epoch). When it resumes
// (SIGCONT) it is a zombie that still believes it owns its partitions and
// its transaction: the broker fences it, and it must rejoin the group with
// a new session, without exiting, while nothing it had produced is ever
// read committed.
func TestFaultPauseWorker(t *testing.T) {
	e := newHangEnv(t, false)
	r := begin(t, e, "pause: a worker SIGSTOPped 15 s, then SIGCONT (zombie)", "workers a, b, 4 partitions, a paused", hangArgs...)
	r.p.start("a")
	r.p.start("b")
	flow := r.hangFlow()
	r.faultAt()
	r.pause("worker a SIGSTOP 15s", r.p.pid("a"), 15*time.Second)
	r.also = func(accounting.Report) bool { r.fenceEvidence(); return true }
	r.finish(flow + 2*time.Minute)
}

// f. The broker's JVM paused (SIGSTOP) for 10 s: every connection hangs
// (the kernel still accepts and buffers), and when it resumes, its clocks
// have jumped: the transaction coordinator finds the worker's transaction
// older than --txn-timeout and the group coordinator finds every session
// expired, all at once.
func TestFaultPauseBroker(t *testing.T) {
	e := newHangEnv(t, true)
	r := begin(t, e, "pause: the broker's JVM SIGSTOPped 10 s", "1 worker, 4 partitions, the broker paused", hangArgs...)
	r.p.start("a")
	flow := r.hangFlow()
	r.faultAt()
	r.pause("broker SIGSTOP 10s", e.Kafka.BrokerPID(t), 10*time.Second)
	r.also = func(accounting.Report) bool { r.fenceEvidence(); return true }
	r.finish(flow + 2*time.Minute)
}

// g. Redis paused (SIGSTOP) for 10 s: reservations hang until the client's
// read timeout (the connection stays open), batches abort and are retried,
// and the worker carries on when Redis resumes with its state intact.
func TestFaultPauseRedis(t *testing.T) {
	e := newHangEnv(t, false)
	if !e.Redis.CanRestart() {
		testenv.Missing(t, "the Redis pause needs a redis-server this test starts (unset REDIS_URL)")
	}
	r := begin(t, e, "pause: Redis SIGSTOPped 10 s", "1 worker, 4 partitions, Redis paused", hangArgs...)
	r.p.start("a")
	flow := r.hangFlow()
	r.faultAt()
	r.pause("Redis SIGSTOP 10s", e.Redis.PID(t), 10*time.Second)
	r.finish(flow + 2*time.Minute)
}

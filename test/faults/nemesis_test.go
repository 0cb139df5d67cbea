package faults_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/flakestream/flakestream/internal/orders"
	"github.com/flakestream/flakestream/test/accounting"
	"github.com/flakestream/flakestream/test/harness"
	"github.com/flakestream/flakestream/test/testenv"
)

// The nemesis (issue 19), after Jepsen's: a random schedule of kills,
// pauses and partitions of the workers, the brokers and Redis, on the
// 3-node cluster with 3 workers, while orders flow for
// FLAKESTREAM_NEMESIS_FOR. The schedule is drawn up front from the run's
// seed (FLAKESTREAM_FAULT_SEED repeats it), logged before it starts and kept
// in the result line (extra.schedule), and the run ends with the suite's
// exact accounting. One fault at a time, so that with min.insync.replicas
// 2 the cluster can always take writes once the fault is detected.
//
//	go run ./test/soak -fault nemesis -seed 7 -for 10m
//
// It runs only when FLAKESTREAM_NEMESIS_FOR is set (never in CI).

// nemesisWorkers are the nemesis's worker instances.
var nemesisWorkers = []string{"a", "b", "c"}

// nemesisAction is one step of a schedule: a fault on a target for a time,
// then a quiet gap.
type nemesisAction struct {
	Kind   string
	Target int // a worker (index into nemesisWorkers) or a node (1-3); unused for Redis
	For    time.Duration
	Gap    time.Duration
}

func (a nemesisAction) String() string {
	target := ""
	switch {
	case strings.HasPrefix(a.Kind, "worker-"):
		target = " " + nemesisWorkers[a.Target]
	case strings.HasPrefix(a.Kind, "node") || a.Kind == "workers-cut-node":
		target = fmt.Sprintf(" %d", a.Target)
	}
	return fmt.Sprintf("%s%s for %s, then %s quiet", a.Kind, target, a.For, a.Gap)
}

// nemesisKinds are the faults a schedule draws from.
var nemesisKinds = []string{
	"worker-kill",      // SIGKILL a worker, start it again after For
	"worker-pause",     // SIGSTOP a worker for For
	"node-kill",        // SIGKILL a node, start it again after For
	"node-pause",       // SIGSTOP a node's JVM for For
	"node-isolate",     // cut a node off the other two for For (clients still reach it)
	"workers-cut-node", // cut the workers off one node for For
	"redis-pause",      // SIGSTOP Redis for For
	"redis-cut",        // cut the workers off Redis for For
}

// nemesisSchedule draws the faults of a run of length total from rng: each
// lasts 3 to 15 s and is followed by 5 to 20 s of quiet; the first begins
// 15 s in and the last ends 30 s before the end.
func nemesisSchedule(rng *rand.Rand, total time.Duration) []nemesisAction {
	var out []nemesisAction
	for at := 15 * time.Second; ; {
		a := nemesisAction{Kind: nemesisKinds[rng.IntN(len(nemesisKinds))],
			For: time.Duration(3+rng.IntN(13)) * time.Second, Gap: time.Duration(5+rng.IntN(16)) * time.Second}
		if strings.HasPrefix(a.Kind, "worker-") { // a worker, not "workers-cut-node"
			a.Target = rng.IntN(len(nemesisWorkers))
		} else {
			a.Target = 1 + rng.IntN(clusterNodes)
		}
		if at+a.For+a.Gap > total-30*time.Second {
			return out
		}
		out = append(out, a)
		at += a.For + a.Gap
	}
}

func TestNemesis(t *testing.T) {
	v := os.Getenv("FLAKESTREAM_NEMESIS_FOR")
	if v == "" {
		t.Skip("the nemesis runs with FLAKESTREAM_NEMESIS_FOR=10m (go run ./test/soak -fault nemesis -seed S -for 10m)")
	}
	total, err := time.ParseDuration(v)
	if err != nil || total < time.Minute {
		t.Fatalf("FLAKESTREAM_NEMESIS_FOR=%q: want a duration of a minute or more", v)
	}
	testenv.NeedNetFaults(t)
	testenv.NeedCgroups(t)
	e := newClusterEnv(t, 6, testenv.KafkaClientListener(), testenv.KafkaNodeCgroups())
	if !e.Redis.CanRestart() {
		testenv.Missing(t, "the nemesis pauses a redis-server it starts (unset REDIS_URL)")
	}
	args := []string{"--max-poll-records", "5000", "--session-timeout", "10s"}
	r := begin(t, e, "nemesis: random kills, pauses, partitions for "+total.String(),
		"3 nodes, RF 3, min ISR 2; 3 workers, 6 partitions", args...)
	schedule := nemesisSchedule(r.rng, total)
	var lines []string
	for i, a := range schedule {
		lines = append(lines, fmt.Sprintf("%2d. %s", i+1, a))
	}
	t.Logf("nemesis schedule (%d faults):\n%s", len(schedule), strings.Join(lines, "\n"))
	r.result.Extra["schedule"] = lines
	for _, w := range nemesisWorkers {
		r.p.start(w)
	}
	rate := 5000
	r.stream(harness.StreamConfig{Records: int(total.Seconds()) * rate, Rate: rate, Mix: orders.Mix{BadPerMille: 2, NumberedPerMille: 2}})
	r.sleepUntil(15 * time.Second)
	r.waitCommittedPast(0, 90*time.Second)
	for i, a := range schedule {
		r.nemesisStep(i+1, a)
		time.Sleep(a.Gap)
	}
	r.also = func(accounting.Report) bool { r.fenceEvidence(); return true }
	r.finish(total + 5*time.Minute)
}

// nemesisStep injects one fault of the schedule and undoes it.
func (r *run) nemesisStep(i int, a nemesisAction) {
	t, k := r.t, r.e.Kafka
	t.Helper()
	name := fmt.Sprintf("%d. %s %s", i, a.Kind, strings.Fields(a.String())[1])
	if a.Kind == "redis-pause" || a.Kind == "redis-cut" {
		name = fmt.Sprintf("%d. %s", i, a.Kind)
	}
	if strings.HasPrefix(a.Kind, "node") || a.Kind == "workers-cut-node" {
		// One node out at a time, as in Kafka's own test.
		k.WaitInSync(t, 3*time.Minute)
	}
	switch a.Kind {
	case "worker-kill":
		w := nemesisWorkers[a.Target]
		f := r.m.Begin(name)
		r.p.kill(w)
		time.Sleep(a.For)
		r.p.start(w)
		r.m.End(f)
	case "worker-pause":
		r.pause(name, r.p.pid(nemesisWorkers[a.Target]), a.For)
	case "node-kill":
		f := r.m.Begin(name)
		k.KillNode(t, a.Target)
		time.Sleep(a.For)
		k.StartNode(t, a.Target)
		r.m.End(f)
	case "node-pause":
		r.pause(name, k.NodePID(t, a.Target), a.For)
	case "node-isolate":
		x := a.Target
		bx, cx := k.NodePorts(t, x)
		type cut struct {
			cgroup string
			ports  []int
		}
		var plan []cut
		for o := 1; o <= clusterNodes; o++ {
			if o != x {
				bo, co := k.NodePorts(t, o)
				plan = append(plan, cut{k.NodeCgroup(t, x), []int{bo, co}}, cut{k.NodeCgroup(t, o), []int{bx, cx}})
			}
		}
		f := r.m.Begin(name)
		var cuts []*testenv.Partition
		for _, c := range plan {
			cuts = append(cuts, testenv.DropFromCgroup(t, name, c.cgroup, c.ports...))
		}
		time.Sleep(a.For)
		for _, c := range cuts {
			c.Heal(t)
		}
		r.m.End(f)
	case "workers-cut-node":
		r.partition(name, a.For, port(t, k.ClientAddrs[a.Target-1]))
	case "redis-pause":
		r.pause(name, r.e.Redis.PID(t), a.For)
	case "redis-cut":
		r.partition(name, a.For, port(t, r.e.Redis.Addr))
	default:
		t.Fatalf("nemesis: unknown fault %q", a.Kind)
	}
	t.Logf("nemesis %s done at %s (%d orders written, %d committed)", name, fmtDur(time.Since(r.start)), r.s.Acked(), r.m.Committed())
}

// A schedule is the seed's: the same seed draws the same faults, each
// with a target of its kind, inside the run.
func TestNemesisSchedule(t *testing.T) {
	total := 10 * time.Minute
	a := nemesisSchedule(rand.New(rand.NewPCG(7, 7)), total)
	b := nemesisSchedule(rand.New(rand.NewPCG(7, 7)), total)
	if len(a) < 10 || fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatalf("seed 7: %d faults, and twice drawn %v vs %v", len(a), a, b)
	}
	at := 15 * time.Second
	for _, x := range a {
		if strings.HasPrefix(x.Kind, "worker-") {
			if x.Target < 0 || x.Target >= len(nemesisWorkers) {
				t.Errorf("%s: no such worker", x)
			}
		} else if x.Target < 1 || x.Target > clusterNodes {
			t.Errorf("%s: no such node", x)
		}
		at += x.For + x.Gap
	}
	if at > total-30*time.Second {
		t.Errorf("the schedule ends at %s, after %s", at, total-30*time.Second)
	}
}

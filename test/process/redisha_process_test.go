package process_test

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/idgen"
	"github.com/flakestream/flakestream/internal/orders"
	"github.com/flakestream/flakestream/test/accounting"
	"github.com/flakestream/flakestream/test/harness"
	"github.com/flakestream/flakestream/test/testenv"
)

// haTopology is a Redis Cluster or a Sentinel setup, with a way to kill
// the primary that holds a key.
type haTopology struct {
	url        string
	killMaster func(t *testing.T, key string) string
}

func startTopology(t *testing.T, topo string) haTopology {
	t.Helper()
	if topo == "cluster" {
		cl := testenv.NewRedisCluster(t)
		return haTopology{url: cl.URL, killMaster: func(t *testing.T, key string) string {
			m := cl.MasterOf(t, key)
			m.Kill()
			return m.Addr
		}}
	}
	s := testenv.NewRedisSentinels(t)
	return haTopology{url: s.URL, killMaster: func(t *testing.T, _ string) string {
		p := s.Primary()
		if p == nil {
			t.Fatal("no primary to kill")
		}
		p.Kill()
		return p.Addr
	}}
}

// parseNumbers reads gen's output: one number a line.
func parseNumbers(t *testing.T, out string) []int64 {
	t.Helper()
	var ids []int64
	for _, l := range strings.Fields(out) {
		id, err := strconv.ParseInt(l, 10, 64)
		if err != nil {
			t.Fatalf("gen printed %q", l)
		}
		ids = append(ids, id)
	}
	return ids
}

// Four gen processes share one (server, worker) through a cluster or a
// sentinel URL (with the default WAIT 1): 400,000 unique numbers, each
// process's strictly increasing.
func TestGenFourProcessesShareOneRedisHA(t *testing.T) {
	for _, topo := range []string{"cluster", "sentinel"} {
		t.Run(topo, func(t *testing.T) {
			h := startTopology(t, topo)
			bin := harness.Binary(t)
			outs := make([]bytes.Buffer, 4)
			errs := make([]bytes.Buffer, 4)
			cmds := make([]*exec.Cmd, 4)
			for i := range cmds {
				cmds[i] = exec.Command(bin, "gen", "--count", "100000", "--redis", h.url, "--redis-prefix", "gen4ha", "--server-id", "1", "--worker-id", "1")
				cmds[i].Stdout, cmds[i].Stderr = &outs[i], &errs[i]
				cmds[i].SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
			}
			for _, c := range cmds {
				if err := c.Start(); err != nil {
					t.Fatal(err)
				}
			}
			for i, c := range cmds {
				if err := c.Wait(); err != nil {
					t.Fatalf("gen %d: %v: %s", i, err, errs[i].String())
				}
			}
			seen := make(map[int64]struct{}, 400000)
			for i := range outs {
				ids := parseNumbers(t, outs[i].String())
				if len(ids) != 100000 {
					t.Fatalf("process %d printed %d numbers", i, len(ids))
				}
				for j := 1; j < len(ids); j++ {
					if ids[j] <= ids[j-1] {
						t.Fatalf("process %d: %d after %d", i, ids[j], ids[j-1])
					}
				}
				for _, id := range ids {
					seen[id] = struct{}{}
				}
			}
			if len(seen) != 400000 {
				t.Fatalf("%d unique numbers of 400000", len(seen))
			}
		})
	}
}

// The primary that holds the sequencer's key is killed with SIGKILL while
// four loops of gen processes and a worker share its (server, worker).
// Every gen process rides through; the numbers of all of them and of the
// worker's output are unique; each loop's numbers increase; the worker's
// accounting is 0 lost, 0 duplicated. The longest time with no number
// issued (from the numbers' own milliseconds) is the time to recover.
func TestFailoverRideThrough(t *testing.T) {
	for _, topo := range []string{"cluster", "sentinel"} {
		t.Run(topo, func(t *testing.T) {
			h := startTopology(t, topo)
			e := harness.NewEnv(t, testenv.Kafka(t), &testenv.Redis{URL: h.url, Kind: topo}, 4)
			e.Produce(t, 20000, orders.Mix{BadPerMille: 5})
			worker := e.StartWorker(t, "w1")

			var stop atomic.Bool
			var wg sync.WaitGroup
			loops := make([][]int64, 4)
			failures := make([]string, 4)
			bin := harness.Binary(t)
			for i := range loops {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for !stop.Load() {
						var out, errb bytes.Buffer
						ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
						cmd := exec.CommandContext(ctx, bin, "gen", "--count", "3000", "--redis", h.url, "--redis-prefix", e.Input, "--server-id", "1", "--worker-id", "1")
						cmd.Stdout, cmd.Stderr = &out, &errb
						cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
						err := cmd.Run()
						cancel()
						if err != nil {
							failures[i] = fmt.Sprintf("%v: %s", err, errb.String())
							return
						}
						loops[i] = append(loops[i], parseNumbers(t, out.String())...)
						time.Sleep(50 * time.Millisecond) // a client's pace, and less memory
					}
				}()
			}
			time.Sleep(3 * time.Second)
			key := "{" + e.Input + "}:seq:1:1"
			killed := h.killMaster(t, key)
			killedAt := time.Now()
			t.Logf("killed primary %s holding %s", killed, key)
			e.Produce(t, 20000, orders.Mix{BadPerMille: 5})
			time.Sleep(15 * time.Second)
			stop.Store(true)
			wg.Wait()
			for i, f := range failures {
				if f != "" {
					t.Errorf("gen loop %d failed: %s", i, f)
				}
			}

			rep := e.Check(t, 2*time.Minute)
			t.Logf("worker: %s", rep)
			if !rep.OK() || rep.Lost != 0 || rep.Duplicated != 0 {
				t.Errorf("worker accounting not exactly once: %s", rep)
			}
			if worker.Exited() {
				t.Errorf("worker exited: %v", worker.Err)
			}

			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			out, err := accounting.ReadCommitted(ctx, e.Kafka.Addrs, e.Output)
			if err != nil {
				t.Fatal(err)
			}
			// who holds each number: a gen loop 0-3, or 4, the worker.
			const byWorker = 4
			seen := map[int64]int8{}
			var all []int64
			for i, ids := range loops {
				for j, id := range ids {
					if j > 0 && id <= ids[j-1] {
						t.Fatalf("gen loop %d: %d after %d", i, id, ids[j-1])
					}
					if who, dup := seen[id]; dup {
						t.Fatalf("number %d issued to gen loop %d and gen loop %d", id, i, who)
					}
					seen[id] = int8(i)
					all = append(all, id)
				}
			}
			fromWorker := 0
			for _, r := range out {
				s, ok := accounting.Header(r, codec.HeaderNumber)
				if !ok {
					continue
				}
				id, err := idgen.ParseID(s)
				if err != nil {
					t.Fatal(err)
				}
				if who, dup := seen[id]; dup && who != byWorker {
					t.Fatalf("number %d issued to the worker and gen loop %d", id, who)
				}
				if _, dup := seen[id]; !dup {
					fromWorker++
				}
				seen[id] = byWorker
			}
			slices.Sort(all)
			l := idgen.DefaultLayout()
			var gap time.Duration
			var gapAt time.Time
			for j := 1; j < len(all); j++ {
				a, _ := l.Decompose(all[j-1])
				b, _ := l.Decompose(all[j])
				if d := time.Duration(b.UnixMs-a.UnixMs) * time.Millisecond; d > gap {
					gap, gapAt = d, a.Time
				}
			}
			t.Logf("%s: %d gen numbers in 4 loops, %d worker numbers, 0 duplicates; longest time with no gen number: %s, from %s (kill at %s)",
				topo, len(all), fromWorker, gap, gapAt.Format("15:04:05.000"), killedAt.Format("15:04:05.000"))
			if len(all) == 0 || all[len(all)-1] == 0 {
				t.Fatal("no numbers")
			}
			last, _ := l.Decompose(all[len(all)-1])
			if !last.Time.After(killedAt) {
				t.Fatalf("no gen number after the kill at %s (last %s)", killedAt, last.Time)
			}
		})
	}
}

// Replaying one range twice on the Cluster, with the order reference as
// the idempotency key: the claims spread over every master, and every
// order gets the same number in both replays.
func TestReplayTwiceOnClusterGivesSameNumbers(t *testing.T) {
	cl := testenv.NewRedisCluster(t)
	e := harness.NewEnv(t, testenv.Kafka(t), &testenv.Redis{URL: cl.URL, Kind: "cluster"}, 3)
	e.Produce(t, 5000, orders.Mix{})
	numbers := func(out string) map[string]string {
		e.Kafka.CreateTopic(t, out, 3)
		e.Kafka.CreateTopic(t, out+".dlq", 3)
		p := harness.Start(t, "replay "+out, "", replayArgs(e, out, "--idempotency-key", "field:order_ref")...)
		p.WaitSuccess(t, 2*time.Minute)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		recs, err := accounting.ReadCommitted(ctx, e.Kafka.Addrs, out)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for _, r := range recs {
			ref, ok, err := codec.Field(r.Value, "order_ref")
			if err != nil || !ok {
				t.Fatalf("output without order_ref: %s", r.Value)
			}
			m[string(ref)], _ = accounting.Header(r, codec.HeaderNumber)
		}
		return m
	}
	first, second := numbers(e.Input+".r1"), numbers(e.Input+".r2")
	if len(first) != 5000 || len(second) != 5000 {
		t.Fatalf("replays wrote %d and %d orders, want 5000 each", len(first), len(second))
	}
	for ref, n := range first {
		if second[ref] != n {
			t.Fatalf("order %s: %s in the first replay, %s in the second", ref, n, second[ref])
		}
	}
	// The keys really are spread: every master holds some.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	masters := 0
	for _, n := range cl.Nodes {
		c := n.Client(t)
		if info, _ := c.Info(ctx, "replication").Result(); !strings.Contains(info, "role:master") {
			continue
		}
		keys, err := c.Keys(ctx, e.Input+":key:*").Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) > 0 {
			masters++
		}
	}
	if masters != 3 {
		t.Fatalf("idempotency keys on %d masters, want 3", masters)
	}
}

package pipeline

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flakestream/flakestream/eos"
	"github.com/flakestream/flakestream/internal/orders"
	"github.com/flakestream/flakestream/test/pipetest"
	"github.com/prometheus/client_golang/prometheus"
)

func startLanes(t *testing.T, e *pipetest.Env, n int, instance string, reg prometheus.Registerer) (*Lanes, *pipetest.Running) {
	t.Helper()
	ls, err := NewLanes(n, eos.Config{Brokers: e.Kafka.Addrs, Topics: []string{e.Input}, Group: e.Group, InstanceID: instance, TransactionTimeout: 5 * time.Second, BackoffMin: 50 * time.Millisecond, BackoffMax: 500 * time.Millisecond, Logger: pipetest.Logger(t), Registerer: reg}, OutputTopic(e.Out), DLQTopic(e.DLQ), Numbers(e.Generator(t, 1)), Codec(e.Codec))
	if err != nil {
		t.Fatal(err)
	}
	return ls, pipetest.Go(t, "lanes", ls.Run)
}

// Two processes of two lanes each share one generator per process; a
// second process joins mid-stream and takes partitions from the first.
// Every record is numbered once, every input partition keeps its order and
// increasing numbers, and each lane is its own member, with suffixed IDs
// and its metrics labelled.
func TestLanes(t *testing.T) {
	e := pipetest.NewEnv(t, 8)
	e.Produce(t, 10000, orders.Mix{BadPerMille: 10, NumberedPerMille: 20})
	reg := prometheus.NewRegistry()
	a, runA := startLanes(t, e, 2, "a", reg)
	if got, want := a.Workers()[1].TransactionalID(), "flakestream-"+e.Group+"-a-1"; got != want {
		t.Fatalf("lane 1 transactional ID %q, want %q", got, want)
	}
	waitFor(t, 30*time.Second, func() bool { return a.Stats().In > 2000 })
	b, runB := startLanes(t, e, 2, "b", prometheus.NewRegistry())
	e.Produce(t, 10000, orders.Mix{BadPerMille: 10, NumberedPerMille: 20})
	// When b's lanes get their partitions is the rebalance's business: a
	// can drain the second batch before it ends. Orders keep coming, a
	// thousand at a time, until both of b's lanes have committed some.
	for round := 0; !committedAll(b.Workers()); round++ {
		if round == 60 {
			t.Fatal("the second process's lanes committed nothing in 60 rounds of a thousand orders: the lanes did not share the partitions")
		}
		e.Produce(t, 1000, orders.Mix{BadPerMille: 10, NumberedPerMille: 20})
		waitUntil(time.Second, func() bool { return committedAll(b.Workers()) })
	}
	rep := e.WaitOutput(t, 90*time.Second)
	pipetest.RequireExactlyOnce(t, rep)
	// The lag gauge is refreshed every 10 s, the first time once the
	// group has committed offsets.
	waitFor(t, 30*time.Second, func() bool { return laneSeries(t, reg)["flakestream_consumer_lag"]["0"] })
	runA.Stop(t)
	runB.Stop(t)
	sa, sb := a.Stats(), b.Stats()
	if sa.In+sb.In != int64(len(e.Inputs)) {
		t.Fatalf("lanes committed %d + %d records, want %d", sa.In, sb.In, len(e.Inputs))
	}
	for i, w := range append(a.Workers(), b.Workers()...) {
		if w.Stats().Committed == 0 {
			t.Errorf("lane %d of its process committed no transaction: the lanes did not share the partitions", i%2)
		}
	}
	requireLaneSeries(t, reg)
}

// requireLaneSeries checks that both lanes export their transactions with
// a lane label and that only lane 0 exports the group's lag.
func requireLaneSeries(t *testing.T, reg *prometheus.Registry) {
	t.Helper()
	lanes := laneSeries(t, reg)
	if l := lanes["flakestream_transactions_total"]; !l["0"] || !l["1"] {
		t.Errorf("flakestream_transactions_total lanes %v, want 0 and 1", l)
	}
	if l := lanes["flakestream_consumer_lag"]; !l["0"] || l["1"] {
		t.Errorf("flakestream_consumer_lag lanes %v, want lane 0 only", l)
	}
}

// laneSeries returns, for each metric of reg, the lane labels its series
// carry.
func laneSeries(t *testing.T, reg *prometheus.Registry) map[string]map[string]bool {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	lanes := map[string]map[string]bool{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "lane" {
					if lanes[mf.GetName()] == nil {
						lanes[mf.GetName()] = map[string]bool{}
					}
					lanes[mf.GetName()][lp.GetValue()] = true
				}
			}
		}
	}
	return lanes
}

// committedAll reports whether every worker has committed a transaction.
func committedAll(ws []*Worker) bool {
	for _, w := range ws {
		if w.Stats().Committed == 0 {
			return false
		}
	}
	return true
}

// waitUntil polls ok for at most d and returns its last answer.
func waitUntil(d time.Duration, ok func() bool) bool {
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

func waitFor(t *testing.T, d time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("not reached in %s", d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// One lane is the plain worker: its IDs are not suffixed. Fewer than one
// is a configuration error, and a lane's bad option fails NewLanes.
func TestLanesConfig(t *testing.T) {
	e := pipetest.NewEnv(t, 1)
	base := []Opt{setLoop(func(s *eos.Config) { s.Brokers = e.Kafka.Addrs; s.Topics = []string{e.Input} }), OutputTopic(e.Out), setLoop(func(s *eos.Config) { s.Group = "g"; s.InstanceID = "x" }), Numbers(e.Generator(t, 1))}
	one, err := NewLanes(1, eos.Config{}, base...)
	if err != nil {
		t.Fatal(err)
	}
	if got := one.Workers()[0].TransactionalID(); got != "flakestream-g-x" {
		t.Fatalf("one lane's transactional ID %q, want flakestream-g-x", got)
	}
	two, err := NewLanes(2, eos.Config{}, append(base, setLoop(func(s *eos.Config) { s.TransactionalID = "tx" }))...)
	if err != nil {
		t.Fatal(err)
	}
	if got := two.Workers()[1].TransactionalID(); got != "tx-1" {
		t.Fatalf("lane 1 of a given transactional ID: %q, want tx-1", got)
	}
	if _, err := NewLanes(0, eos.Config{}, base...); !errors.Is(err, eos.ErrBadConfig) || !strings.Contains(err.Error(), "lanes 0") {
		t.Fatalf("0 lanes: %v, want eos.ErrBadConfig naming it", err)
	}
	if _, err := NewLanes(2, eos.Config{}, base[:len(base)-1]...); !errors.Is(err, ErrNoNumberer) {
		t.Fatalf("lanes without a numberer: %v, want ErrNoNumberer", err)
	}
}

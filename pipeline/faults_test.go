package pipeline

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/eos"
	"github.com/flakestream/flakestream/internal/orders"
	"github.com/flakestream/flakestream/test/accounting"
	"github.com/flakestream/flakestream/test/pipetest"
)

// produceInChunks writes n orders in chunks with a pause between them, so
// that faults land while records flow.
func produceInChunks(t *testing.T, e *pipetest.Env, n, chunk int, pause time.Duration, mix orders.Mix) {
	t.Helper()
	for done := 0; done < n; done += chunk {
		e.Produce(t, min(chunk, n-done), mix)
		time.Sleep(pause)
	}
}

// Two workers in one group, a third joining and the first leaving while
// records flow: every rebalance aborts the open transaction, and the output
// is still exactly once.
func TestWorkerRebalance(t *testing.T) {
	e := pipetest.NewEnv(t, 6)
	a := start(t, e, "a", setLoop(func(s *eos.Config) { s.MaxPollRecords = 500 }))
	produceInChunks(t, e, 6000, 1000, 100*time.Millisecond, orders.Mix{BadPerMille: 5})
	b := start(t, e, "b", setLoop(func(s *eos.Config) { s.MaxPollRecords = 500 }))
	produceInChunks(t, e, 6000, 1000, 100*time.Millisecond, orders.Mix{BadPerMille: 5})
	a.stop(t)
	produceInChunks(t, e, 6000, 1000, 100*time.Millisecond, orders.Mix{BadPerMille: 5})
	rep := e.WaitOutput(t, 90*time.Second)
	pipetest.RequireExactlyOnce(t, rep)
	sa, sb := a.w.Stats(), b.w.Stats()
	if sa.In == 0 || sb.In == 0 {
		t.Fatalf("one worker did nothing, so there was no rebalance to survive: a %+v, b %+v", sa, sb)
	}
	if sa.In+sb.In != int64(len(e.Inputs)) {
		t.Fatalf("workers committed %d+%d records of %d", sa.In, sb.In, len(e.Inputs))
	}
}

// Redis stopped mid-stream: once the numbers it reserved ahead run out (or
// grow older than their maximum age), the worker aborts, reports not ready,
// retries with backoff, and resumes by itself when Redis is back. Nothing is
// produced without a number, nothing is lost or duplicated.
func TestWorkerRedisOutage(t *testing.T) {
	e := pipetest.NewEnv(t, 3)
	if !e.Redis.CanRestart() {
		t.Skipf("cannot stop a %s Redis", e.Redis.Kind)
	}
	wk := start(t, e, "a", setLoop(func(s *eos.Config) { s.MaxPollRecords = 500 }))
	produceInChunks(t, e, 3000, 1000, 50*time.Millisecond, orders.Mix{})
	if !accounting.WaitFor(30*time.Second, func() bool { return wk.w.Stats().In >= 3000 }) {
		t.Fatalf("worker did not catch up before the outage: %+v", wk.w.Stats())
	}
	e.Redis.Stop(t)
	// More than the prefetcher can hold, so the outage is felt.
	e.Produce(t, 20000, orders.Mix{})
	if !accounting.WaitFor(15*time.Second, func() bool { return wk.w.Stats().Aborted > 0 }) {
		t.Fatalf("no transaction aborted while Redis was down: %+v", wk.w.Stats())
	}
	if err := wk.w.Ready(); err == nil || !errors.Is(err, ErrNumbering) {
		t.Fatalf("Ready() = %v during the outage, want ErrNumbering", err)
	}
	inDuringOutage := wk.w.Stats().In
	time.Sleep(2 * time.Second)
	if got := wk.w.Stats().In; got != inDuringOutage {
		t.Fatalf("records committed while Redis was down: %d -> %d", inDuringOutage, got)
	}
	e.Redis.Start(t)
	e.Produce(t, 3000, orders.Mix{})
	rep := e.WaitOutput(t, 60*time.Second)
	pipetest.RequireExactlyOnce(t, rep)
	if err := wk.w.Ready(); err != nil {
		t.Fatalf("not ready after Redis came back: %v", err)
	}
	t.Logf("stats: %+v", wk.w.Stats())
}

// Every dead-letter class goes to the DLQ with its bytes untouched and
// headers that say why and where from; the counts balance.
func TestWorkerDeadLetters(t *testing.T) {
	e := pipetest.NewEnv(t, 2)
	e.Produce(t, 3000, orders.Mix{BadPerMille: 60})
	wk := start(t, e, "a")
	rep := e.WaitOutput(t, 60*time.Second)
	pipetest.RequireExactlyOnce(t, rep)
	dlq, err := e.ReadTopic(e.DLQ)
	if err != nil {
		t.Fatal(err)
	}
	byClass := map[string]int{}
	for _, d := range dlq {
		class, _ := accounting.Header(d, codec.HeaderErrorClass)
		msg, _ := accounting.Header(d, codec.HeaderError)
		src, _ := accounting.Header(d, codec.HeaderSource)
		if msg == "" || !strings.HasPrefix(src, e.Input+"/") {
			t.Fatalf("dead letter without reason or source: %q %q", msg, src)
		}
		byClass[class]++
	}
	for _, k := range orders.BadKinds {
		if byClass[k.Class()] == 0 {
			t.Errorf("no dead letter of class %s: %v", k.Class(), byClass)
		}
	}
	wk.stop(t)
	if s := wk.w.Stats(); s.DLQ != int64(len(dlq)) || s.In != s.Numbered+s.Passthrough+s.DLQ {
		t.Fatalf("stats %+v, %d dead letters", s, len(dlq))
	}
}

// A group with no committed offsets starts at the earliest offset by
// default; with StartLatest it skips what is already there.
func TestWorkerStartLatest(t *testing.T) {
	e := pipetest.NewEnv(t, 1)
	e.Produce(t, 100, orders.Mix{})
	wk := start(t, e, "a", Start(StartLatest))
	if !accounting.WaitFor(20*time.Second, func() bool { return wk.w.Ready() == nil }) {
		t.Fatalf("worker never became ready: %v", wk.w.Ready())
	}
	time.Sleep(500 * time.Millisecond)
	e.Inputs = e.Inputs[:0]
	e.Produce(t, 50, orders.Mix{})
	rep := e.WaitOutput(t, 30*time.Second)
	pipetest.RequireExactlyOnce(t, rep)
	if s := wk.w.Stats(); s.In != 50 {
		t.Fatalf("a latest-starting worker numbered %d records, want the 50 new ones", s.In)
	}
}

func TestWorkerRefusesMissingOutputTopic(t *testing.T) {
	e := pipetest.NewEnv(t, 1)
	w, err := NewWorker(eos.Config{Brokers: e.Kafka.Addrs, Topics: []string{e.Input}, Group: "g", TopicWait: eos.NoWait(300 * time.Millisecond)}, OutputTopic(e.Input+".nope"), Numbers(e.Generator(t, 1)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := w.Run(ctx); !errors.Is(err, eos.ErrMissingTopic) {
		t.Fatalf("Run = %v, want eos.ErrMissingTopic naming the fix", err)
	}
}

func TestNewWorkerValidates(t *testing.T) {
	ok := eos.Config{Brokers: []string{"x"}, Topics: []string{"a"}, Group: "g"}
	with := func(f func(*eos.Config)) eos.Config { s := ok; f(&s); return s }
	cases := []struct {
		name string
		s    eos.Config
		opts []Opt
		want error
	}{
		{"no brokers", with(func(s *eos.Config) { s.Brokers = nil }), []Opt{OutputTopic("b"), Numbers(nopNumberer{})}, eos.ErrNoBrokers},
		{"no input", with(func(s *eos.Config) { s.Topics = nil }), []Opt{OutputTopic("b"), Numbers(nopNumberer{})}, eos.ErrNoInput},
		{"no output", ok, []Opt{Numbers(nopNumberer{})}, ErrNoOutput},
		{"no group", with(func(s *eos.Config) { s.Group = "" }), []Opt{OutputTopic("b"), Numbers(nopNumberer{})}, eos.ErrNoGroup},
		{"no numberer", ok, []Opt{OutputTopic("b")}, ErrNoNumberer},
		{"output is input", ok, []Opt{OutputTopic("a"), Numbers(nopNumberer{})}, eos.ErrSameTopic},
		{"bad start", ok, []Opt{OutputTopic("b"), Numbers(nopNumberer{}), Start("middle")}, eos.ErrBadConfig},
		{"short txn timeout", with(func(s *eos.Config) { s.TransactionTimeout = time.Millisecond }), []Opt{OutputTopic("b"), Numbers(nopNumberer{})}, eos.ErrBadConfig},
		{"backoff max below min", with(func(s *eos.Config) { s.BackoffMin, s.BackoffMax = time.Second, time.Millisecond }), []Opt{OutputTopic("b"), Numbers(nopNumberer{})}, eos.ErrBadConfig},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := NewWorker(c.s, c.opts...); !errors.Is(err, c.want) {
				t.Fatalf("NewWorker = %v, want %v", err, c.want)
			}
		})
	}
	w, err := NewWorker(eos.Config{Brokers: []string{"x"}, Topics: []string{"in"}, Group: "g", InstanceID: "pod-7"}, OutputTopic("out"), Numbers(nopNumberer{}))
	if err != nil || w.TransactionalID() != "flakestream-g-pod-7" || w.cfg.dlq != "in.dlq" {
		t.Fatalf("defaults: %v %q %q", err, w.TransactionalID(), w.cfg.dlq)
	}
}

// nopNumberer satisfies the required Numbers option in tests that never
// number anything.
type nopNumberer struct{}

func (nopNumberer) AppendN(_ context.Context, dst []int64, _ int) ([]int64, error) { return dst, nil }

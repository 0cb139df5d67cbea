package eos

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// copyStep copies every record to out, partition for partition.
type copyStep struct {
	out       string
	pending   int64
	committed atomic.Int64
}

func (c *copyStep) Start(ctx context.Context, s *Session) (map[string][]int32, error) {
	t, err := s.CheckTopics(ctx, false, c.out)
	return t.Produce(), err
}

func (c *copyStep) Process(ctx context.Context, tx *Tx, fetches kgo.Fetches) error {
	c.pending = 0
	fetches.EachRecord(func(r *kgo.Record) {
		if r.Attrs.IsControl() {
			panic("the loop handed a transaction marker to the step")
		}
		c.pending++
		tx.Produce(ctx, &kgo.Record{Topic: c.out, Partition: r.Partition, Value: r.Value})
	})
	return nil
}

func (c *copyStep) Committed() error { c.committed.Add(c.pending); return nil }
func (c *copyStep) Aborted()         {}

func cluster(t *testing.T, parts int32, topics ...string) []string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(parts, topics...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

// produceTxn writes n records per partition to topic in one committed
// transaction, so each partition ends with a commit marker.
func produceTxn(t *testing.T, brokers []string, topic string, parts int32, n int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.TransactionalID("upstream"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for p := range parts {
		for i := range n {
			cl.Produce(t.Context(), &kgo.Record{Topic: topic, Partition: p, Value: []byte(strconv.Itoa(i))}, nil)
		}
	}
	if err := cl.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := cl.EndTransaction(t.Context(), kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A caught-up consumer of a transactional topic shows lag 0, not 1 per
// partition: the commit marker's offset is committed too.
func TestCaughtUpTransactionalPartitionHasNoLag(t *testing.T) {
	for _, mode := range []Mode{Transactional, AtLeastOnce} {
		t.Run(strconv.Itoa(int(mode)), func(t *testing.T) {
			const parts = 3
			brokers := cluster(t, parts, "in", "out")
			produceTxn(t, brokers, "in", parts, 5)
			lag := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "lag"}, []string{"topic", "partition"})
			step := &copyStep{out: "out"}
			if mode == AtLeastOnce {
				step = &copyStep{out: ""}
			}
			l, err := New(Config{Brokers: brokers, Topics: []string{"in"}, Group: "g", InstanceID: "i", Mode: mode, LagEvery: 50 * time.Millisecond}, atLeastOnceSafe{step}, Metrics{Lag: lag})
			if err != nil {
				t.Fatal(err)
			}
			runUntil(t, l, "15 records and lag 0 on every partition", func() bool {
				vals := gauges(lag)
				return step.committed.Load() == 3*5 && len(vals) == parts && vals[0] == 0 && vals[1] == 0 && vals[2] == 0
			})
		})
	}
}

// atLeastOnceSafe runs a copyStep without an output in AtLeastOnce mode.
type atLeastOnceSafe struct{ *copyStep }

func (a atLeastOnceSafe) Start(ctx context.Context, s *Session) (map[string][]int32, error) {
	if a.out == "" {
		_, err := s.CheckTopics(ctx, false)
		return nil, err
	}
	return a.copyStep.Start(ctx, s)
}

func (a atLeastOnceSafe) Process(ctx context.Context, tx *Tx, fetches kgo.Fetches) error {
	if tx == nil {
		a.pending = int64(fetches.NumRecords())
		return nil
	}
	return a.copyStep.Process(ctx, tx, fetches)
}

// BeforeProduce runs before the first produce of a session, with the
// partitions the step produces to, and a bound ends the run on a marker.
func TestBeforeProduceAndBound(t *testing.T) {
	brokers := cluster(t, 2, "in", "out")
	produceTxn(t, brokers, "in", 2, 4)
	var calls atomic.Int32
	var got map[string][]int32
	step := &copyStep{out: "out"}
	stop := map[string]map[int32]int64{"in": {0: 2, 1: 4}} // partition 1 ends on its marker's offset
	l, err := New(Config{Brokers: brokers, Topics: []string{"in"}, Group: "g", InstanceID: "i", IdleGuard: -1, BeforeProduce: func(_ context.Context, _ *kgo.Client, parts map[string][]int32) error {
		calls.Add(1)
		got = parts
		return nil
	}, Bound: &Bound{Stop: stop, Done: func(c map[string]map[int32]kgo.EpochOffset) bool {
		return c["in"][0].Offset >= 2 && c["in"][1].Offset >= 4
	}}}, step, Metrics{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := l.Run(ctx); err != nil || ctx.Err() != nil {
		t.Fatalf("Run = %v, ctx %v: want the bound to end it", err, ctx.Err())
	}
	if n := step.committed.Load(); n != 2+4 {
		t.Fatalf("copied %d records, want 6 (2 of partition 0, 4 of partition 1)", n)
	}
	ps, offsets := got[ConsumerOffsetsTopic]
	if calls.Load() != 1 || len(got["out"]) != 2 || !offsets || ps != nil {
		t.Fatalf("BeforeProduce called %d times with %v, want once with out's 2 partitions and all of %s", calls.Load(), got, ConsumerOffsetsTopic)
	}
}

// The guard runs at the start of a session before the first poll, not at
// the first produce: with nothing to read it still runs (an orphan on
// __consumer_offsets would keep the group's offsets unstable, and the
// session would never reach a produce).
func TestBeforeProduceRunsBeforeTheFirstPoll(t *testing.T) {
	brokers := cluster(t, 1, "in", "out")
	var calls atomic.Int32
	step := &copyStep{out: "out"}
	l, err := New(Config{Brokers: brokers, Topics: []string{"in"}, Group: "g", InstanceID: "i", IdleGuard: -1, BeforeProduce: func(context.Context, *kgo.Client, map[string][]int32) error { calls.Add(1); return nil }}, step, Metrics{})
	if err != nil {
		t.Fatal(err)
	}
	runUntil(t, l, "the guard on an empty input", func() bool { return calls.Load() == 1 })
}

// A guard that fails after an aborted transaction holds the next poll: it
// is retried after a backoff, nothing is produced before it passes, and
// every record (read again from the committed offsets) commits once.
func TestGuardFailureAfterAnAbortIsRetriedBeforePolling(t *testing.T) {
	brokers := cluster(t, 1, "in", "out")
	produceTxn(t, brokers, "in", 1, 3)
	var calls atomic.Int32
	step := &failOnce{copyStep: &copyStep{out: "out"}}
	l, err := New(Config{Brokers: brokers, Topics: []string{"in"}, Group: "g", InstanceID: "i", IdleGuard: -1, BackoffMin: 10 * time.Millisecond, BackoffMax: 20 * time.Millisecond, BeforeProduce: func(context.Context, *kgo.Client, map[string][]int32) error {
		if calls.Add(1) == 2 { // the call after the aborted batch
			return errors.New("cannot describe producers yet")
		}
		return nil
	}}, step, Metrics{})
	if err != nil {
		t.Fatal(err)
	}
	runUntil(t, l, "the batch after the guard's failure", func() bool { return step.committed.Load() == 3 })
	if calls.Load() != 3 {
		t.Fatalf("guard called %d times, want 3 (session start, the failed call after the abort, its retry)", calls.Load())
	}
	if n := countRecords(t, brokers, "out"); n != 3 {
		t.Fatalf("%d records committed on out, want 3", n)
	}
}

// INVALID_PRODUCER_EPOCH when ending a transaction (a broker bumped the
// epoch under our own abort after a broker died) replaces the session; it
// does not end Run. PRODUCER_FENCED stays fatal (TestTxnErrorKeepsTheCause).
func TestInvalidProducerEpochReplacesTheSession(t *testing.T) {
	testTxnOffsetCommitErrorReplacesTheSession(t, kerr.InvalidProducerEpoch)
}

// A fenced producer (PRODUCER_FENCED: the broker timed out its transaction
// and bumped its epoch while it hung, or it resumed from a pause as a
// zombie) does not end Run: the session is replaced, the new one
// initializes the producer ID again (fencing whatever the old one left
// open) and rejoins, as Kafka Streams does after a fence.
func TestProducerFencedReplacesTheSession(t *testing.T) {
	testTxnOffsetCommitErrorReplacesTheSession(t, kerr.ProducerFenced)
}

// testTxnOffsetCommitErrorReplacesTheSession answers the first
// TxnOffsetCommit with code and checks that the loop goes on to commit every
// record exactly once.
func testTxnOffsetCommitErrorReplacesTheSession(t *testing.T, code *kerr.Error) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "in", "out"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	brokers := c.ListenAddrs()
	produceTxn(t, brokers, "in", 1, 4)
	var injected atomic.Int32
	c.ControlKey(int16(kmsg.TxnOffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if injected.Add(1) > 1 {
			return nil, nil, false
		}
		r := req.(*kmsg.TxnOffsetCommitRequest)
		resp := r.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
		for _, rt := range r.Topics {
			st := kmsg.NewTxnOffsetCommitResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = code.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	step := &copyStep{out: "out"}
	l, err := New(Config{Brokers: brokers, Topics: []string{"in"}, Group: "g", InstanceID: "i", BackoffMin: 10 * time.Millisecond, BackoffMax: 20 * time.Millisecond}, step, Metrics{})
	if err != nil {
		t.Fatal(err)
	}
	runUntil(t, l, "every record after "+code.Message, func() bool { return step.committed.Load() == 4 })
	if injected.Load() == 0 {
		t.Fatalf("the %s fault never hit", code.Message)
	}
	if n := countRecords(t, brokers, "out"); n != 4 {
		t.Fatalf("%d records committed on out, want 4", n)
	}
}

// countRecords reads topic read_committed to its end and counts its
// records (markers excluded).
func countRecords(t *testing.T, brokers []string, topic string) int {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	n := 0
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return n
		}
		n += fs.NumRecords()
	}
}

// gauges returns every series of g by value, in no order.
func gauges(g *prometheus.GaugeVec) []float64 {
	ch := make(chan prometheus.Metric, 16)
	go func() { g.Collect(ch); close(ch) }()
	var out []float64
	for m := range ch {
		var d dto.Metric
		if m.Write(&d) == nil {
			out = append(out, d.GetGauge().GetValue())
		}
	}
	return out
}

// failOnce fails its first batch with a passing error.
type failOnce struct {
	*copyStep
	failed  atomic.Bool
	aborted atomic.Int32
}

func (f *failOnce) Process(ctx context.Context, tx *Tx, fetches kgo.Fetches) error {
	if !f.failed.Swap(true) {
		tx.Produce(ctx, &kgo.Record{Topic: f.out, Value: []byte("from the aborted batch")})
		return errors.New("a passing failure")
	}
	return f.copyStep.Process(ctx, tx, fetches)
}

func (f *failOnce) Aborted() { f.aborted.Add(1) }

// A batch that fails is aborted and counted, the guard runs again before
// the next produce, and the retried batch commits every record once.
func TestAbortedBatchRunsTheGuardAgain(t *testing.T) {
	brokers := cluster(t, 1, "in", "out")
	produceTxn(t, brokers, "in", 1, 3)
	var calls atomic.Int32
	step := &failOnce{copyStep: &copyStep{out: "out"}}
	l, err := New(Config{Brokers: brokers, Topics: []string{"in"}, Group: "g", InstanceID: "i", IdleGuard: -1, BackoffMin: 10 * time.Millisecond, BackoffMax: 20 * time.Millisecond, BeforeProduce: func(context.Context, *kgo.Client, map[string][]int32) error { calls.Add(1); return nil }}, step, Metrics{})
	if err != nil {
		t.Fatal(err)
	}
	runUntil(t, l, "the retried batch", func() bool { return step.committed.Load() == 3 })
	committed, aborted := l.Counts()
	if aborted != 1 || step.aborted.Load() != 1 || committed < 1 || calls.Load() != 2 {
		t.Fatalf("committed %d, aborted %d (step told %d), guard called %d times; want 1 abort and the guard twice",
			committed, aborted, step.aborted.Load(), calls.Load())
	}
}

// rerouting fails its first batch and says its next attempt goes another
// way (Rerouter), as the worker does after a broker refused a record.
type rerouting struct {
	*failOnce
	asked atomic.Int32
}

func (r *rerouting) Rerouted() bool { r.asked.Add(1); return true }

// A rerouted batch is tried again at once: with a backoff of an hour, the
// retried batch commits only if the loop does not wait for it, and the
// failure leaves the loop's readiness alone.
func TestReroutedBatchIsRetriedAtOnce(t *testing.T) {
	brokers := cluster(t, 1, "in", "out")
	produceTxn(t, brokers, "in", 1, 3)
	step := &rerouting{failOnce: &failOnce{copyStep: &copyStep{out: "out"}}}
	l, err := New(Config{Brokers: brokers, Topics: []string{"in"}, Group: "g", InstanceID: "i", BackoffMin: time.Hour, BackoffMax: time.Hour}, step, Metrics{})
	if err != nil {
		t.Fatal(err)
	}
	runUntil(t, l, "the rerouted batch, retried without the hour's backoff", func() bool { return step.committed.Load() == 3 })
	if _, aborted := l.Counts(); aborted != 1 || step.asked.Load() != 1 {
		t.Fatalf("aborted %d, Rerouted asked %d times; want 1 and 1", aborted, step.asked.Load())
	}
	if err := l.lastErr.Load(); err != nil {
		t.Errorf("a rerouted batch made the loop unready: %v", *err)
	}
}

func TestFetchErrorUnwraps(t *testing.T) {
	err := fmt.Errorf("%w: %w", ErrFatal, &FetchError{Topic: "t", Partition: 2, Err: kerr.TopicAuthorizationFailed})
	var fe *FetchError
	if !errors.Is(err, ErrFatal) || !errors.Is(err, kerr.TopicAuthorizationFailed) || !errors.As(err, &fe) || fe.Partition != 2 {
		t.Fatalf("%v: want ErrFatal, the Kafka error and the FetchError all reachable", err)
	}
}

// Authorization is fatal, fencing replaces the session, and the caller can
// still see why.
func TestTxnErrorKeepsTheCause(t *testing.T) {
	l := &Loop{cfg: Config{TransactionalID: "tid", Group: "g", Topics: []string{"in"}}}
	txnError := func(op, _ string, err error) error { return l.txnError(op, err) }
	err := txnError("end transaction", "tid", kerr.TransactionalIDAuthorizationFailed)
	if !errors.Is(err, ErrFatal) || !errors.Is(err, kerr.TransactionalIDAuthorizationFailed) {
		t.Fatalf("%v: want ErrFatal wrapping kerr.TransactionalIDAuthorizationFailed", err)
	}
	if !strings.Contains(err.Error(), "--operation Write --transactional-id tid") {
		t.Errorf("%v: does not give the kafka-acls command for WRITE on the transactional ID", err)
	}
	if err := txnError("end transaction", "tid", kerr.GroupAuthorizationFailed); !strings.Contains(err.Error(), "--operation Read --group g") {
		t.Errorf("%v: does not give the kafka-acls command for READ on the group", err)
	}
	if err := txnError("end transaction", "tid", kerr.ProducerFenced); errors.Is(err, ErrFatal) || !errors.Is(err, errRestartSession) ||
		!errors.Is(err, kerr.ProducerFenced) {
		t.Fatalf("%v: want PRODUCER_FENCED to replace the session, not end the run", err)
	}
	if err := txnError("end transaction", "tid", kerr.InvalidProducerEpoch); errors.Is(err, ErrFatal) || !errors.Is(err, errRestartSession) {
		t.Fatalf("%v: want INVALID_PRODUCER_EPOCH to replace the session, not end the run", err)
	}
	if err := txnError("begin transaction", "tid", kerr.CoordinatorNotAvailable); !errors.Is(err, errRestartSession) || !errors.Is(err, kerr.CoordinatorNotAvailable) {
		t.Fatalf("%v: want a session restart wrapping the cause", err)
	}
}

// A bound whose end is a commit marker that arrives in a poll of its own
// (the poll before it was full of records) still ends the run.
func TestBoundEndsOnAMarkerPolledAlone(t *testing.T) {
	brokers := cluster(t, 1, "in", "out")
	produceTxn(t, brokers, "in", 1, 4) // offsets 0..3, the marker at 4
	step := &copyStep{out: "out"}
	l, err := New(Config{Brokers: brokers, Topics: []string{"in"}, Group: "g", InstanceID: "i", MaxPollRecords: 4, Bound: &Bound{Stop: map[string]map[int32]int64{"in": {0: 5}},
		Done: func(c map[string]map[int32]kgo.EpochOffset) bool { return c["in"][0].Offset >= 5 }}}, step, Metrics{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := l.Run(ctx); err != nil || ctx.Err() != nil {
		t.Fatalf("Run = %v, ctx %v: want the bound on the marker to end it", err, ctx.Err())
	}
	if n := step.committed.Load(); n != 4 {
		t.Fatalf("copied %d records, want 4", n)
	}
}

// A guard that fails with a passing error replaces the session; the batch
// it held back is read again, and nothing is lost.
func TestGuardFailureRestartsTheSessionWithoutLoss(t *testing.T) {
	brokers := cluster(t, 1, "in", "out")
	produceTxn(t, brokers, "in", 1, 5)
	var calls atomic.Int32
	step := &copyStep{out: "out"}
	l, err := New(Config{Brokers: brokers, Topics: []string{"in"}, Group: "g", InstanceID: "i", IdleGuard: -1, BackoffMin: 10 * time.Millisecond, BackoffMax: 20 * time.Millisecond, BeforeProduce: func(context.Context, *kgo.Client, map[string][]int32) error {
		if calls.Add(1) == 1 {
			return errors.New("cannot describe producers yet")
		}
		return nil
	}}, step, Metrics{})
	if err != nil {
		t.Fatal(err)
	}
	runUntil(t, l, "every record, after the guard's failure", func() bool { return step.committed.Load() == 5 })
	if calls.Load() != 2 {
		t.Fatalf("guard called %d times, want 2 (the failed call, then the new session's)", calls.Load())
	}
}

// runUntil runs l until cond holds (failing the test after 20s), then
// stops it and fails the test if Run returned an error.
func runUntil(t *testing.T, l *Loop, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	waitFor(t, what, cond)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// stopOnCommitted cancels the run from inside Committed: a stop that
// arrives after an AtLeastOnce batch was handled, before its offsets were
// committed.
type stopOnCommitted struct {
	atLeastOnceSafe
	stop context.CancelFunc
}

func (s stopOnCommitted) Committed() error {
	s.stop()
	return s.atLeastOnceSafe.Committed()
}

// In AtLeastOnce mode a stop that arrives once the step has handled a
// batch does not cancel the batch's offset commit: a graceful restart
// would otherwise hand the step the same records again.
func TestAtLeastOnceStopAfterTheStepStillCommits(t *testing.T) {
	brokers := cluster(t, 1, "in")
	produceTxn(t, brokers, "in", 1, 5)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	step := stopOnCommitted{atLeastOnceSafe{&copyStep{}}, cancel}
	l, err := New(Config{Brokers: brokers, Topics: []string{"in"}, Group: "g", InstanceID: "i", Mode: AtLeastOnce}, step, Metrics{})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Run(ctx); err != nil {
		t.Fatalf("Run = %v, want nil after a stop", err)
	}
	if n := step.committed.Load(); n != 5 {
		t.Fatalf("the step handled %d records, want the 5 of one batch", n)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = "g"
	resp, err := req.RequestWith(t.Context(), cl)
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	for _, tp := range resp.Topics {
		for _, p := range tp.Partitions {
			got = append(got, p.Offset)
		}
	}
	// 5 records and the commit marker after them.
	if len(got) != 1 || got[0] != 6 {
		t.Fatalf("committed offsets %v, want [6]: the stop cancelled the handled batch's commit", got)
	}
}

// A session that committed and then has nothing to read runs the guard
// once after IdleGuard, and not again until it has committed again: a
// lost commit marker's pending offsets are ended by the member that left
// them even when it has no more records, so the member given those
// partitions next can read their offsets.
func TestIdleSessionRunsTheGuardOnceAfterACommit(t *testing.T) {
	brokers := cluster(t, 1, "in", "out")
	produceTxn(t, brokers, "in", 1, 3)
	var calls atomic.Int32
	step := &copyStep{out: "out"}
	const idle = 50 * time.Millisecond
	l, err := New(Config{Brokers: brokers, Topics: []string{"in"}, Group: "g", InstanceID: "i", IdleGuard: idle,
		BeforeProduce: func(context.Context, *kgo.Client, map[string][]int32) error { calls.Add(1); return nil }}, step, Metrics{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	waitFor(t, "the first batch", func() bool { return step.committed.Load() == 3 })
	waitFor(t, "the guard of the idle session", func() bool { return calls.Load() == 2 })
	// Idle for many IdleGuards more: nothing committed since, so no
	// further guard (a slow machine can only make fewer calls, not more).
	time.Sleep(20 * idle)
	if n := calls.Load(); n != 2 {
		t.Errorf("guard called %d times while idle with nothing committed since its last run, want 2 (start, idle once)", n)
	}
	produceTxn(t, brokers, "in", 1, 2)
	waitFor(t, "the second batch", func() bool { return step.committed.Load() == 5 })
	waitFor(t, "the guard after the second batch", func() bool { return calls.Load() == 3 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := countRecords(t, brokers, "out"); n != 5 {
		t.Fatalf("%d records committed on out, want 5", n)
	}
}

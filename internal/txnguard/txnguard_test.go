package txnguard

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	topic = "out"
	txnID = "worker-a"
)

// orphanCluster builds, on kfake, the state a broker crash leaves behind on
// Kafka 4 (transactions v2): producer ID P has a transaction open on
// out[0] at epoch E holding three records "orphan-0..2", and the producer
// was re-initialised at epoch E+1 by a coordinator that no longer tracks
// that transaction.
//
// kfake keeps one record of an open transaction for both the coordinator
// and the partition (DescribeProducers is computed from the coordinator's
// producer state), and its crash recovery aborts every open transaction, so
// it cannot lose the coordinator's half alone. The partition's half here is
// kfake's own (the records, the open transaction holding the last stable
// offset, DescribeProducers, and the data of epoch E+1 joining it); the
// coordinator's loss is played by two controls: InitProducerID answers
// (P, E+1) without aborting, as a coordinator does that sees an empty
// transaction, and DescribeTransactions answers "Empty" at E+1.
//
// It returns the cluster and the new producer (transactional ID txnID, at
// epoch E+1), and P and E. coord, if not nil, replaces what
// DescribeTransactions answers.
func orphanCluster(t *testing.T, coord func(pid int64, epoch int16) kmsg.DescribeTransactionsResponseTransactionState) (*kfake.Cluster, *kgo.Client, int64, int16) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	old := client(t, c, kgo.TransactionalID(txnID))
	if err := old.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		produce(ctx, t, old, "orphan-"+string(rune('0'+i)))
	}
	pid, epoch, err := old.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The old producer dies here, its transaction open: it never sends
	// EndTxn (it is not closed, and the controls below fence it anyway).

	c.ControlKey(int16(kmsg.InitProducerID), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		req := kreq.(*kmsg.InitProducerIDRequest)
		resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
		resp.ProducerID, resp.ProducerEpoch = pid, epoch+1
		return resp, nil, true
	})
	c.ControlKey(int16(kmsg.DescribeTransactions), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kreq.(*kmsg.DescribeTransactionsRequest)
		resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
		for _, id := range req.TransactionalIDs {
			st := kmsg.NewDescribeTransactionsResponseTransactionState()
			st.TransactionalID, st.State, st.ProducerID, st.ProducerEpoch, st.StartTimestamp = id, "Empty", pid, epoch+1, -1
			if coord != nil {
				st = coord(pid, epoch)
			}
			resp.TransactionStates = append(resp.TransactionStates, st)
		}
		return resp, nil, true
	})
	cl := client(t, c, kgo.TransactionalID(txnID))
	if p, e, err := cl.ProducerID(ctx); err != nil || p != pid || e != epoch+1 {
		t.Fatalf("new producer: %d/%d %v, want %d/%d", p, e, err, pid, epoch+1)
	}
	return c, cl, pid, epoch
}

func client(t *testing.T, c *kfake.Cluster, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func produce(ctx context.Context, t *testing.T, cl *kgo.Client, v string) {
	t.Helper()
	if err := cl.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte(v)}).FirstErr(); err != nil {
		t.Fatalf("produce %s: %v", v, err)
	}
}

// commitNext runs the new producer's first transaction: records "new-0..1"
// on out[0], committed.
func commitNext(t *testing.T, cl *kgo.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produce(ctx, t, cl, "new-0")
	produce(ctx, t, cl, "new-1")
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit: %v", err)
	}
}

// readCommitted returns the values a read_committed reader sees on out[0]
// once it has seen the last value "new-1".
func readCommitted(t *testing.T, c *kfake.Cluster) []string {
	t.Helper()
	cl := client(t, c, kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var got []string
	for !slices.Contains(got, "new-1") {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read_committed reader: no new-1 within 15s; saw %v", got)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	return got
}

var allParts = map[string][]int32{topic: {0, 1}}

// Without the guard the kfake orphan behaves as on Kafka: the next commit
// exposes the orphan's records. This proves the test below can fail.
func TestOrphanExposedWithoutGuard(t *testing.T) {
	c, cl, _, _ := orphanCluster(t, nil)
	var g *Guard // turned off
	if aborts, err := g.Check(context.Background(), cl, allParts); aborts != nil || err != nil {
		t.Fatalf("a nil guard: %v %v", aborts, err)
	}
	commitNext(t, cl)
	got := readCommitted(t, c)
	if want := []string{"orphan-0", "orphan-1", "orphan-2", "new-0", "new-1"}; !slices.Equal(got, want) {
		t.Fatalf("read_committed saw %v, want the orphan exposed: %v", got, want)
	}
}

// The guard aborts the orphan before the first produce, counts and logs
// it, and the next commit exposes only its own records.
func TestGuardAbortsOrphan(t *testing.T) {
	c, cl, pid, epoch := orphanCluster(t, nil)
	reg := prometheus.NewRegistry()
	var logs syncBuffer
	g, err := New(slog.New(slog.NewTextHandler(&logs, nil)), reg)
	if err != nil {
		t.Fatal(err)
	}
	aborts, err := g.Check(context.Background(), cl, allParts)
	if err != nil {
		t.Fatal(err)
	}
	want := []Abort{{Topic: topic, Partition: 0, ProducerID: pid, Epoch: epoch, CurrentEpoch: epoch + 1, StartOffset: 0}}
	if !slices.Equal(aborts, want) {
		t.Fatalf("aborts %+v, want %+v", aborts, want)
	}
	if n := testutil.ToFloat64(g.aborted.WithLabelValues(topic)); n != 1 {
		t.Errorf("%s{topic=%q} = %v, want 1", MetricName, topic, n)
	}
	for _, s := range []string{"ended an orphaned transaction", "marker=ABORT", "partition=0", "epoch=" + itoa(int(epoch)), "current_epoch=" + itoa(int(epoch)+1), "start_offset=0"} {
		if !strings.Contains(logs.String(), s) {
			t.Errorf("log lacks %q:\n%s", s, logs.String())
		}
	}
	// (A second check here would abort again on kfake, harmlessly: kfake's
	// DescribeProducers reports the coordinator's view, which a marker
	// written with WriteTxnMarkers does not change. Kafka reports the
	// partition's producer state, which the marker closes.)
	commitNext(t, cl)
	if got := readCommitted(t, c); !slices.Equal(got, []string{"new-0", "new-1"}) {
		t.Fatalf("read_committed saw %v, want only the new transaction's [new-0 new-1]", got)
	}
}

// An orphan whose transaction the coordinator committed (CompleteCommit at
// the next epoch: only the marker on this partition was lost) is finished
// with a COMMIT: its records are part of a transaction whose input offsets
// were committed, and aborting them would have them produced again.
func TestGuardCommitsCommittedOrphan(t *testing.T) {
	c, cl, pid, epoch := orphanCluster(t, func(pid int64, epoch int16) kmsg.DescribeTransactionsResponseTransactionState {
		st := kmsg.NewDescribeTransactionsResponseTransactionState()
		st.TransactionalID, st.State, st.ProducerID, st.ProducerEpoch, st.StartTimestamp = txnID, "CompleteCommit", pid, epoch+1, -1
		return st
	})
	var logs syncBuffer
	g, err := New(slog.New(slog.NewTextHandler(&logs, nil)), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	aborts, err := g.Check(context.Background(), cl, allParts)
	if err != nil {
		t.Fatal(err)
	}
	want := []Abort{{Topic: topic, Partition: 0, ProducerID: pid, Epoch: epoch, CurrentEpoch: epoch + 1, StartOffset: 0, Committed: true}}
	if !slices.Equal(aborts, want) {
		t.Fatalf("ended %+v, want %+v", aborts, want)
	}
	if !strings.Contains(logs.String(), "marker=COMMIT") {
		t.Errorf("log does not name the COMMIT marker:\n%s", logs.String())
	}
	commitNext(t, cl)
	if got, want := readCommitted(t, c), []string{"orphan-0", "orphan-1", "orphan-2", "new-0", "new-1"}; !slices.Equal(got, want) {
		t.Fatalf("read_committed saw %v, want the committed orphan and the new transaction %v", got, want)
	}
}

// A transaction the coordinator still tracks is its to finish: the guard
// must not abort it (it could be one the coordinator is committing).
func TestGuardLeavesTrackedTransaction(t *testing.T) {
	_, cl, _, _ := orphanCluster(t, func(pid int64, epoch int16) kmsg.DescribeTransactionsResponseTransactionState {
		st := kmsg.NewDescribeTransactionsResponseTransactionState()
		st.TransactionalID, st.State, st.ProducerID, st.ProducerEpoch = txnID, "PrepareCommit", pid, epoch
		tt := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
		tt.Topic, tt.Partitions = topic, []int32{0}
		st.Topics = append(st.Topics, tt)
		return st
	})
	g, err := New(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	aborts, err := g.Check(context.Background(), cl, allParts)
	if err != nil || len(aborts) != 0 {
		t.Fatalf("aborted a transaction its coordinator tracks: %+v %v", aborts, err)
	}
}

// Without ALTER on the cluster the guard warns once, aborts nothing and
// returns no error, however often it runs.
func TestGuardWithoutPermissionWarnsOnce(t *testing.T) {
	c, cl, _, _ := orphanCluster(t, nil)
	c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.WriteTxnMarkers}, Err: kerr.ClusterAuthorizationFailed, Count: -1})
	var logs syncBuffer
	reg := prometheus.NewRegistry()
	g, err := New(slog.New(slog.NewTextHandler(&logs, nil)), reg)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		aborts, err := g.Check(context.Background(), cl, allParts)
		if err != nil || len(aborts) != 0 {
			t.Fatalf("check without permission: %+v %v", aborts, err)
		}
	}
	if n := strings.Count(logs.String(), "not allowed to run"); n != 1 {
		t.Fatalf("%d permission warnings, want 1:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "--operation Alter --cluster") {
		t.Errorf("the warning does not give the ACL:\n%s", logs.String())
	}
	if n := testutil.ToFloat64(g.aborted.WithLabelValues(topic)); n != 0 {
		t.Errorf("%s = %v, want 0", MetricName, n)
	}
}

// A second guard on the same registry shares the counter; a registry
// holding another collector under the name is an error.
func TestNewRegistersOnce(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, err := New(nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	b.aborted.WithLabelValues("x").Inc()
	if n := testutil.ToFloat64(a.aborted.WithLabelValues("x")); n != 1 {
		t.Fatalf("the guards do not share the counter: %v", n)
	}
	other := prometheus.NewRegistry()
	other.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: MetricName, Help: "x"}))
	if _, err := New(nil, other); err == nil {
		t.Fatal("New took a registry whose collector of that name is not a counter vector")
	}
}

func TestCheckNeedsTransactionalClient(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topic))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	g, _ := New(nil, nil)
	if _, err := g.Check(context.Background(), client(t, c), allParts); err != ErrNotTransactional {
		t.Fatalf("err %v, want ErrNotTransactional", err)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func itoa(i int) string { return strconv.Itoa(i) }

// A topic the producer may not READ (DescribeProducers needs it; often
// __consumer_offsets) is skipped with the one warning, and the others are
// still checked and repaired.
func TestGuardSkipsUnreadableTopic(t *testing.T) {
	c, cl, _, _ := orphanCluster(t, nil)
	const unreadable = "offsets" // stands for __consumer_offsets, which kfake does not list
	if _, err := kadm.NewClient(cl).CreateTopic(context.Background(), 1, 1, nil, unreadable); err != nil {
		t.Fatal(err)
	}
	c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.DescribeProducers}, Topic: unreadable, Err: kerr.TopicAuthorizationFailed, Count: -1})
	var logs syncBuffer
	g, err := New(slog.New(slog.NewTextHandler(&logs, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	aborts, err := g.Check(context.Background(), cl, map[string][]int32{topic: {0, 1}, unreadable: {0}})
	if err != nil || len(aborts) != 1 || aborts[0].Topic != topic {
		t.Fatalf("check: %+v %v, want the orphan on %s aborted", aborts, err, topic)
	}
	if n := strings.Count(logs.String(), "not allowed to run"); n != 1 || !strings.Contains(logs.String(), "READ on topic "+unreadable) {
		t.Fatalf("want one warning naming READ on the unreadable topic:\n%s", logs.String())
	}
}

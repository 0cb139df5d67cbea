package txnguard

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flakestream/flakestream/internal/kafkaacl"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	out   = "out"
	dlq   = "dlq"
	txnID = "worker-a"
	group = "workers"
)

var parts = map[string][]int32{out: {1, 0}, dlq: {0}, ConsumerOffsetsTopic: nil}

// cleanupSeen is what the guard asked of the coordinator, as kfake saw it.
type cleanupSeen struct {
	mu       sync.Mutex
	added    []string              // topic/partition added with AddPartitionsToTxn
	groups   []string              // groups added with AddOffsetsToTxn
	reqs     map[kmsg.Request]bool // kfake asks When once per entity of a request
	ends     []bool                // EndTxn: commit or not
	markers  int                   // WriteTxnMarkers requests (there must be none)
	produced int                   // Produce requests (there must be none)
}

// guardCluster is a kfake cluster with topics out (2 partitions) and dlq
// (1), whose DescribeTransactions answers state (at the producer's own ID
// and epoch; "" answers TRANSACTIONAL_ID_NOT_FOUND), and a client of
// transactional ID txnID in group group; it records the guard's requests.
func guardCluster(t *testing.T, state string) (*kfake.Cluster, *kgo.Client, *cleanupSeen) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, out), kfake.SeedTopics(1, dlq))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.TransactionalID(txnID), kgo.ConsumerGroup(group))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pid, epoch, err := cl.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c.ControlKey(int16(kmsg.DescribeTransactions), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kreq.(*kmsg.DescribeTransactionsRequest)
		resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
		for _, id := range req.TransactionalIDs {
			st := kmsg.NewDescribeTransactionsResponseTransactionState()
			st.TransactionalID, st.State, st.ProducerID, st.ProducerEpoch, st.StartTimestamp = id, state, pid, epoch, -1
			if state == "" {
				st.ErrorCode = kerr.TransactionalIDNotFound.Code
			}
			resp.TransactionStates = append(resp.TransactionStates, st)
		}
		return resp, nil, true
	})
	seen := &cleanupSeen{reqs: map[kmsg.Request]bool{}}
	c.Fault(kfake.Fault{Count: -1, When: func(kreq kmsg.Request) bool {
		seen.mu.Lock()
		defer seen.mu.Unlock()
		if seen.reqs[kreq] {
			return false
		}
		seen.reqs[kreq] = true
		switch req := kreq.(type) {
		case *kmsg.AddPartitionsToTxnRequest:
			for _, rt := range req.Topics {
				for _, p := range rt.Partitions {
					seen.added = append(seen.added, rt.Topic+"/"+string(rune('0'+p)))
				}
			}
			for _, tx := range req.Transactions {
				for _, rt := range tx.Topics {
					for _, p := range rt.Partitions {
						seen.added = append(seen.added, rt.Topic+"/"+string(rune('0'+p)))
					}
				}
			}
		case *kmsg.AddOffsetsToTxnRequest:
			seen.groups = append(seen.groups, req.Group)
		case *kmsg.EndTxnRequest:
			seen.ends = append(seen.ends, req.Commit)
		case *kmsg.WriteTxnMarkersRequest:
			seen.markers++
		case *kmsg.ProduceRequest:
			seen.produced++
		}
		return false // observe only
	}})
	return c, cl, seen
}

// The cleanup transaction adds every partition given and the group's
// offsets, writes no record and no WriteTxnMarkers, and ends with the
// decision of the coordinator's last transaction: COMMIT after a commit,
// ABORT after anything else.
func TestCheckEndsWithTheLastDecision(t *testing.T) {
	for _, tc := range []struct {
		state  string
		commit bool
	}{
		{"", false}, {"Empty", false}, {"Ongoing", false}, {"PrepareAbort", false}, {"CompleteAbort", false},
		{"PrepareCommit", true}, {"CompleteCommit", true},
	} {
		t.Run("state="+tc.state, func(t *testing.T) {
			_, cl, seen := guardCluster(t, tc.state)
			g, err := New(nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			res, err := g.Check(context.Background(), cl, parts)
			if err != nil {
				t.Fatal(err)
			}
			if res.Commit != tc.commit || res.Partitions != 3 || res.Group != group {
				t.Fatalf("result %+v, want commit %v, 3 partitions, group %s", res, tc.commit, group)
			}
			seen.mu.Lock()
			defer seen.mu.Unlock()
			slices.Sort(seen.added)
			if want := []string{"dlq/0", "out/0", "out/1"}; !slices.Equal(seen.added, want) {
				t.Errorf("added %v, want %v", seen.added, want)
			}
			if !slices.Equal(seen.groups, []string{group}) {
				t.Errorf("offsets added for %v, want [%s]", seen.groups, group)
			}
			if !slices.Equal(seen.ends, []bool{tc.commit}) {
				t.Errorf("EndTxn commit=%v, want [%v]", seen.ends, tc.commit)
			}
			if seen.markers != 0 || seen.produced != 0 {
				t.Errorf("%d WriteTxnMarkers and %d Produce requests, want none", seen.markers, seen.produced)
			}
		})
	}
}

// The producer goes on at the epoch it knows after the cleanup: its next
// transaction commits.
func TestProducerGoesOnAfterCheck(t *testing.T) {
	_, cl, _ := guardCluster(t, "CompleteAbort")
	g, _ := New(nil, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for i := range 2 {
		if _, err := g.Check(ctx, cl, parts); err != nil {
			t.Fatalf("check %d: %v", i, err)
		}
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: out, Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatalf("produce after check %d: %v", i, err)
		}
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatalf("commit after check %d: %v", i, err)
		}
	}
}

// A refused right is an error that names it and its kafka-acls command,
// never a warning: the caller must not produce, and retrying cannot help.
func TestCheckRefusalNamesTheRight(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault kfake.Fault
		want  []string
	}{
		{"topic", kfake.Fault{Keys: []kmsg.Key{kmsg.AddPartitionsToTxn}, Topic: dlq, Err: kerr.TopicAuthorizationFailed, Count: -1},
			[]string{`may not WRITE topic "dlq"`, "--operation Write --topic dlq", "AddPartitionsToTxn"}},
		{"group", kfake.Fault{Keys: []kmsg.Key{kmsg.AddOffsetsToTxn}, Err: kerr.GroupAuthorizationFailed, Count: -1},
			[]string{`may not READ group "workers"`, "--operation Read --group workers"}},
		{"transactional-id", kfake.Fault{Keys: []kmsg.Key{kmsg.DescribeTransactions}, Err: kerr.TransactionalIDAuthorizationFailed, Count: -1},
			[]string{`may not DESCRIBE transactional-id "worker-a"`, "--operation Describe --transactional-id worker-a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, out), kfake.SeedTopics(1, dlq))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.Fault(tc.fault)
			cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.TransactionalID(txnID), kgo.ConsumerGroup(group), kgo.RequestRetries(1))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			g, _ := New(nil, nil)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_, err = g.Check(ctx, cl, parts)
			ae, ok := errors.AsType[*kafkaacl.Error](err)
			if !ok {
				t.Fatalf("err %v, want a *kafkaacl.Error", err)
			}
			kafkaacl.WithPrincipal(err, "User:w")
			for _, s := range tc.want {
				if !strings.Contains(ae.Error(), s) {
					t.Errorf("%q lacks %q", ae.Error(), s)
				}
			}
			if strings.Contains(ae.Error(), "--cluster") {
				t.Errorf("%q asks for a right on the cluster", ae.Error())
			}
		})
	}
}

// A nil guard is off: it does nothing.
func TestNilGuardIsOff(t *testing.T) {
	_, cl, seen := guardCluster(t, "CompleteAbort")
	var g *Guard
	if res, err := g.Check(context.Background(), cl, parts); err != nil || res.Partitions != 0 {
		t.Fatalf("a nil guard: %+v %v", res, err)
	}
	seen.mu.Lock()
	defer seen.mu.Unlock()
	if len(seen.ends) != 0 {
		t.Fatalf("a nil guard ended %d transactions", len(seen.ends))
	}
}

// The metrics say what the guard did: one cleanup transaction, ended with
// ABORT after a transaction the coordinator still had open (Ongoing, seen
// by DescribeTransactions), covering both partitions of out and the one of
// dlq, inspected (kfake lets it list their producers), no orphan seen. Every
// series exists at 0 from the first check; the log carries nothing at INFO
// and above when nothing was seen.
func TestCheckMetrics(t *testing.T) {
	_, cl, _ := guardCluster(t, "Ongoing")
	reg := prometheus.NewRegistry()
	var logs syncBuffer
	g, err := New(nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Check(context.Background(), cl, parts); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		v    *prometheus.CounterVec
		lvs  []string
		want float64
	}{
		{g.m.cleanups, []string{"abort", "ok"}, 1},
		{g.m.cleanups, []string{"commit", "ok"}, 0},
		{g.m.cleanups, []string{"abort", "error"}, 0},
		{g.m.coordinatorOpen, []string{"Ongoing"}, 1},
		{g.m.coordinatorOpen, []string{"PrepareCommit"}, 0},
		{g.m.partitions, []string{out, "true"}, 2},
		{g.m.partitions, []string{dlq, "true"}, 1},
		{g.m.partitions, []string{out, "false"}, 0},
		{g.m.seen, []string{out}, 0},
		{g.m.seenOld, []string{dlq}, 0},
	} {
		if got := testutil.ToFloat64(c.v.WithLabelValues(c.lvs...)); got != c.want {
			t.Errorf("%v: %v, want %v", c.lvs, got, c.want)
		}
	}
	for name, want := range map[string]int{CleanupsMetric: 4, CoordinatorOpenMetric: 3, PartitionsMetric: 4, OrphansSeenMetric: 2, MetricName: 2} {
		if n, err := testutil.GatherAndCount(reg, name); err != nil || n != want {
			t.Errorf("%s: %d series (%v), want %d", name, n, err, want)
		}
	}
	if logs.String() != "" {
		t.Errorf("logged %q", logs.String())
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
	b.m.seen.WithLabelValues("x").Inc()
	if n := testutil.ToFloat64(a.m.seen.WithLabelValues("x")); n != 1 {
		t.Fatalf("the guards do not share the counter: %v", n)
	}
	other := prometheus.NewRegistry()
	other.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: MetricName, Help: "x"}))
	if _, err := New(nil, other); err == nil {
		t.Fatal("New took a registry whose collector of that name is not a counter vector")
	}
}

func TestCheckNeedsTransactionalClient(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, out))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	g, _ := New(nil, nil)
	if _, err := g.Check(context.Background(), cl, parts); err != ErrNotTransactional {
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

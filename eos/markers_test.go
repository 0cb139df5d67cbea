package eos

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The first produce of a transaction waits until the coordinator no longer
// shows the transaction before it PrepareCommit: with the coordinator
// answering PrepareCommit three times after the first commit, the next
// transaction's first produce comes only after the answer that does not,
// and every record commits once.
func TestFirstProduceWaitsForTheMarkers(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "in", "out"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	brokers := c.ListenAddrs()
	var (
		mu       sync.Mutex
		events   []string
		prepares atomic.Int32
	)
	note := func(e string) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	}
	c.ControlKey(int16(kmsg.DescribeTransactions), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if prepares.Add(1) > 3 {
			note("describe: done")
			return nil, nil, false
		}
		note("describe: PrepareCommit")
		r := req.(*kmsg.DescribeTransactionsRequest)
		resp := r.ResponseKind().(*kmsg.DescribeTransactionsResponse)
		for _, id := range r.TransactionalIDs {
			st := kmsg.NewDescribeTransactionsResponseTransactionState()
			st.TransactionalID, st.State, st.ProducerID = id, "PrepareCommit", 1
			resp.TransactionStates = append(resp.TransactionStates, st)
		}
		return resp, nil, true
	})
	c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		// The worker's, not the upstream producer's (produceTxn).
		if id := req.(*kmsg.ProduceRequest).TransactionID; id != nil && *id != "upstream" {
			note("produce")
		}
		return nil, nil, false
	})
	produceTxn(t, brokers, "in", 1, 3)
	step := &copyStep{out: "out"}
	l, err := New(Config{Brokers: brokers, Topics: []string{"in"}, Group: "g", InstanceID: "i", MarkerWait: time.Minute}, step, Metrics{})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		waitFor(t, "the first batch", func() bool { return step.committed.Load() == 3 })
		produceTxn(t, brokers, "in", 1, 2)
	}()
	runUntil(t, l, "both batches", func() bool { return step.committed.Load() == 5 })
	mu.Lock()
	defer mu.Unlock()
	done := slices.Index(events, "describe: done")
	last := slices.Index(events, "describe: PrepareCommit")
	switch {
	case done < 0 || last < 0:
		t.Fatalf("the coordinator was not asked as the test expects: %v", events)
	case slices.Contains(events[last:done], "produce"):
		t.Fatalf("a produce went out while the last transaction showed PrepareCommit: %v", events)
	case !slices.Contains(events[done:], "produce"):
		t.Fatalf("no produce after the markers were done: %v", events)
	}
	if n := countRecords(t, brokers, "out"); n != 5 {
		t.Fatalf("%d records committed on out, want 5", n)
	}
}

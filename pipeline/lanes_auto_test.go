package pipeline

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/flakestream/flakestream/eos"
	"github.com/flakestream/flakestream/test/pipetest"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// auto is one lane per core, no more than the partitions (when known) and
// MaxAutoLanes, and never none.
func TestAutoLanes(t *testing.T) {
	for _, tc := range []struct{ procs, partitions, want int }{
		{1, 4, 1},
		{2, 4, 2},
		{2, 1, 1},
		{8, 4, 4},
		{8, 3, 3},
		{16, 64, MaxAutoLanes},
		{2, 0, 2},  // partitions not known
		{16, 0, 4}, // not known: the cap
		{0, 4, 1},
	} {
		if got := AutoLanes(tc.procs, tc.partitions); got != tc.want {
			t.Errorf("AutoLanes(%d procs, %d partitions) = %d, want %d", tc.procs, tc.partitions, got, tc.want)
		}
	}
}

// The lanes of a process share its buffer bounds, but no lane's share
// falls below one transaction's records or the least fetch share.
func TestLaneShare(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		lanes, buffered, poll int
		fetch                 int32
		wantBuffered          int
		wantFetch, wantPart   int32
	}{
		{"one lane", 1, DefaultMaxBufferedRecords, 10000, DefaultFetchMaxBytes, DefaultMaxBufferedRecords, DefaultFetchMaxBytes, DefaultFetchMaxPartitionBytes},
		{"two lanes", 2, DefaultMaxBufferedRecords, 10000, DefaultFetchMaxBytes, DefaultMaxBufferedRecords / 2, DefaultFetchMaxBytes / 2, DefaultFetchMaxPartitionBytes / 2},
		{"four lanes", 4, DefaultMaxBufferedRecords, 10000, DefaultFetchMaxBytes, 25000, 8 << 20, 256 << 10},
		{"a transaction's records at least", 4, 20000, 10000, DefaultFetchMaxBytes, 10000, 8 << 20, 256 << 10},
		{"the least fetch share", 16, DefaultMaxBufferedRecords, 1000, 1 << 20, 6250, minFetchShare, minFetchShare},
		{"a fetch bound below the least share", 2, DefaultMaxBufferedRecords, 1000, 64 << 10, 50000, 64 << 10, 64 << 10},
	} {
		c := cfg{lanes: tc.lanes, maxBuffered: tc.buffered, fetchMaxBytes: tc.fetch}
		c.eos.MaxPollRecords = tc.poll
		buffered, fetch, part := c.laneShare()
		if buffered != tc.wantBuffered || fetch != tc.wantFetch || part != tc.wantPart {
			t.Errorf("%s: share %d records, %d fetch bytes, %d partition bytes; want %d, %d, %d", tc.name, buffered, fetch, part, tc.wantBuffered, tc.wantFetch, tc.wantPart)
		}
	}
}

// Lane 0 of several keeps the plain worker's IDs, so that a process going
// from one lane to several fences what the one lane left open.
func TestLaneZeroKeepsIDs(t *testing.T) {
	e := pipetest.NewEnv(t, 1)
	base := []Opt{setLoop(func(s *eos.Config) {
		s.Brokers = e.Kafka.Addrs
		s.Topics = []string{e.Input}
		s.Group = "g"
		s.InstanceID = "x"
	}),
		OutputTopic(e.Out), Numbers(e.Generator(t, 1))}
	one, err := NewLanes(1, eos.Config{}, base...)
	if err != nil {
		t.Fatal(err)
	}
	three, err := NewLanes(3, eos.Config{}, base...)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"flakestream-g-x", "flakestream-g-x-1", "flakestream-g-x-2"}
	var got, instances []string
	for _, w := range three.Workers() {
		got = append(got, w.TransactionalID())
		instances = append(instances, w.cfg.eos.InstanceID)
	}
	if !slices.Equal(got, want) || !slices.Equal(instances, []string{"x", "x-1", "x-2"}) {
		t.Fatalf("three lanes: transactional IDs %q, instances %q; want %q and x, x-1, x-2", got, instances, want)
	}
	if id := one.Workers()[0].TransactionalID(); id != got[0] {
		t.Fatalf("one lane's transactional ID %q, lane 0's of three %q: want them equal", id, got[0])
	}
	if ids := retiredIDs("t", 3); ids[0] != "t-0" || ids[1] != "t-3" || ids[len(ids)-1] != "t-15" || slices.Contains(ids, "t-1") || slices.Contains(ids, "t-2") {
		t.Fatalf("retired IDs of 3 lanes: %q, want t-0 and t-3 to t-15", ids)
	}
}

// After --lanes goes down (here 2 to 1), the lane that is gone may have
// left a transaction open (a process killed mid-transaction before the
// restart). The new process ends it at start instead of leaving readers to
// wait for its timeout (a minute here), and only describes the retired IDs
// that hold nothing.
func TestLanesRetireOpenTransaction(t *testing.T) {
	e := pipetest.NewEnv(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The orphan: lane 1 of the earlier process, its transaction open on
	// the output, its producer gone silent.
	old := e.Kafka.Client(t, kgo.TransactionalID("tx-1"), kgo.TransactionTimeout(time.Minute), kgo.DefaultProduceTopic(e.Out))
	if err := old.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := old.ProduceSync(ctx, &kgo.Record{Value: []byte("orphan")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	adm := e.Kafka.Admin(t)
	if d, err := adm.DescribeTransactions(ctx, "tx-1"); err != nil || d["tx-1"].State != "Ongoing" {
		t.Fatalf("the orphan: %+v, %v; want an Ongoing transaction", d["tx-1"], err)
	}
	ls, err := NewLanes(1, eos.Config{Brokers: e.Kafka.Addrs, Topics: []string{e.Input}, Group: e.Group, TransactionalID: "tx", Logger: pipetest.Logger(t)},
		OutputTopic(e.Out), DLQTopic(e.DLQ), Numbers(e.Generator(t, 1)), Codec(e.Codec))
	if err != nil {
		t.Fatal(err)
	}
	run := pipetest.Go(t, "lanes", ls.Run)
	defer run.Stop(t)
	waitFor(t, 30*time.Second, func() bool {
		d, err := adm.DescribeTransactions(ctx, "tx-1")
		return err == nil && d["tx-1"].Err == nil && !openState(d["tx-1"].State)
	})
	d, err := adm.DescribeTransactions(ctx, "tx-2")
	if err != nil {
		t.Fatal(err)
	}
	if err := d["tx-2"].Err; !errors.Is(err, kerr.TransactionalIDNotFound) {
		t.Fatalf("tx-2, never used: %v; want it left unknown to the coordinator (TRANSACTIONAL_ID_NOT_FOUND)", err)
	}
	if err := old.EndTransaction(ctx, kgo.TryCommit); err == nil {
		t.Fatal("the old lane committed after its ID was retired: want it fenced")
	}
}

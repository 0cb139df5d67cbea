package eos

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// A short poll is topped up, in the same batch, with what the client has
// or fetches within TopUpWait, up to MaxPollRecords; a wait that ends with
// nothing more adds no fetch error; and a full poll is not topped up.
func TestTopUp(t *testing.T) {
	brokers := cluster(t, 1, "in", "out")
	produceTxn(t, brokers, "in", 1, 5)
	l, err := New(Config{Brokers: brokers, Topics: []string{"in"}, Group: "g", InstanceID: "i", MaxPollRecords: 4, TopUpWait: 200 * time.Millisecond}, &copyStep{out: "out"}, Metrics{})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics("in"), kgo.KeepControlRecords(),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	first := cl.PollRecords(ctx, 1) // 5 records and a marker are there
	if n := first.NumRecords(); n != 1 {
		t.Fatalf("first poll: %d records, want 1", n)
	}
	got := l.topUp(ctx, cl, first)
	if n := got.NumRecords(); n != 4 {
		t.Fatalf("topped up to %d records, want MaxPollRecords 4", n)
	}
	if full := l.topUp(ctx, cl, got); full.NumRecords() != 4 {
		t.Fatalf("a full poll was topped up to %d records", full.NumRecords())
	}
	rest := cl.PollRecords(ctx, 4) // the last record and the marker
	start := time.Now()
	got = l.topUp(ctx, cl, rest)
	if n := got.NumRecords(); n != rest.NumRecords() || n == 0 {
		t.Fatalf("nothing more to fetch, but %d records became %d", rest.NumRecords(), n)
	}
	if errs := got.Errors(); len(errs) != 0 {
		t.Fatalf("the end of the wait became a fetch error: %v", errs)
	}
	if waited := time.Since(start); waited < 150*time.Millisecond {
		t.Fatalf("returned after %s, before TopUpWait", waited)
	}
}

// With top-ups on, a loop fed a little at a time still copies every record
// once.
func TestLoopWithTopUpCopiesEverythingOnce(t *testing.T) {
	brokers := cluster(t, 2, "in", "out")
	step := &copyStep{out: "out"}
	l, err := New(Config{Brokers: brokers, Topics: []string{"in"}, Group: "g", InstanceID: "i", TopUpWait: 20 * time.Millisecond}, step, Metrics{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	for range 20 {
		produceTxn(t, brokers, "in", 2, 3)
		time.Sleep(5 * time.Millisecond)
	}
	waitFor(t, "120 records copied", func() bool { return step.committed.Load() == 120 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := countRecords(t, brokers, "out"); n != 120 {
		t.Fatalf("out holds %d records, want 120", n)
	}
}

// Two polls merge into one fetch in which each partition appears once, its
// records in the order polled.
func TestMergeFetchesKeepsEachPartitionWhole(t *testing.T) {
	rec := func(p int32, off int64) *kgo.Record { return &kgo.Record{Topic: "in", Partition: p, Offset: off} }
	part := func(p int32, offs ...int64) kgo.FetchPartition {
		fp := kgo.FetchPartition{Partition: p}
		for _, o := range offs {
			fp.Records = append(fp.Records, rec(p, o))
		}
		return fp
	}
	a := kgo.Fetches{{Topics: []kgo.FetchTopic{{Topic: "in", Partitions: []kgo.FetchPartition{part(0, 1, 2), part(1, 7)}}}}}
	b := kgo.Fetches{{Topics: []kgo.FetchTopic{{Topic: "in", Partitions: []kgo.FetchPartition{part(1, 8, 9), part(2, 4)}}}}}
	got := map[int32][]int64{}
	entries := map[int32]int{}
	mergeFetches(a, b).EachPartition(func(p kgo.FetchTopicPartition) {
		entries[p.Partition]++
		for _, r := range p.Records {
			got[p.Partition] = append(got[p.Partition], r.Offset)
		}
	})
	want := map[int32][]int64{0: {1, 2}, 1: {7, 8, 9}, 2: {4}}
	for p, offs := range want {
		if entries[p] != 1 || fmt.Sprint(got[p]) != fmt.Sprint(offs) {
			t.Errorf("partition %d: %d entries, offsets %v; want 1 entry, %v", p, entries[p], got[p], offs)
		}
	}
	if len(a[0].Topics[0].Partitions[1].Records) != 1 {
		t.Error("merging changed the first poll's records")
	}
}

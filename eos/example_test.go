package eos_test

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flakestream/flakestream/eos"
)

// copyStep is the smallest Step: it copies every record of a batch to the
// same partition of another topic, in the batch's transaction.
type copyStep struct{ out string }

// Start checks that the output exists and names the partitions the loop's
// orphaned-transaction guard must look at.
func (c copyStep) Start(ctx context.Context, s *eos.Session) (map[string][]int32, error) {
	t, err := s.CheckTopics(ctx, false, c.out)
	return t.Produce(), err
}

// Process produces into the open transaction; the loop commits the
// records and the consumed offsets together.
func (c copyStep) Process(ctx context.Context, tx *eos.Tx, fetches kgo.Fetches) error {
	fetches.EachRecord(func(r *kgo.Record) {
		tx.Produce(ctx, &kgo.Record{Topic: c.out, Partition: r.Partition, Key: r.Key, Value: r.Value})
	})
	return nil
}

func (copyStep) Committed() error { return nil }
func (copyStep) Aborted()         {}

// A copy loop, exactly once: every record of "in" once in "out". Bound
// makes the run end once the first three offsets are committed; without
// it, Run runs until its context ends.
func Example_copyLoop() {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "in", "out"))
	if err != nil {
		panic(err)
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	producer, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic("in"))
	if err != nil {
		panic(err)
	}
	defer producer.Close()
	for _, v := range []string{"a", "b", "c"} {
		if err := producer.ProduceSync(ctx, kgo.StringRecord(v)).FirstErr(); err != nil {
			panic(err)
		}
	}

	loop, err := eos.New(eos.Config{
		Brokers: brokers, Topics: []string{"in"}, Group: "copy", InstanceID: "copy-1",
		Bound: &eos.Bound{
			Stop: map[string]map[int32]int64{"in": {0: 3}},
			Done: func(committed map[string]map[int32]kgo.EpochOffset) bool {
				return committed["in"][0].Offset >= 3
			},
		},
	}, copyStep{out: "out"}, eos.Metrics{})
	if err != nil {
		panic(err)
	}
	if err := loop.Run(ctx); err != nil {
		panic(err)
	}

	reader, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics("out"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		panic(err)
	}
	defer reader.Close()
	var got []string
	for len(got) < 3 && ctx.Err() == nil {
		reader.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	fmt.Println(got)
	// Output: [a b c]
}

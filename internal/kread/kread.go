// Package kread reads whole topics as a read_committed consumer outside any
// group: what the demo shows and checks of its topics, and what the tests
// read back.
package kread

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ReadCommitted reads every committed record of topics from the start, as a
// read_committed consumer outside any group, up to the end offsets the
// topics have when it starts (an open transaction holds it until it ends),
// or until ctx ends. opts reach the cluster (the seed brokers, and TLS and
// SASL for a secured one).
func ReadCommitted(ctx context.Context, opts []kgo.Opt, topics ...string) ([]*kgo.Record, error) {
	// Control records (transaction markers) are kept so that the reader
	// sees its position reach the end offset even when the last offsets of
	// a partition are markers, which consumers never see as data.
	cl, err := kgo.NewClient(append(opts[:len(opts):len(opts)], kgo.ConsumeTopics(topics...),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.KeepControlRecords())...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	offs, err := kadm.NewClient(cl).ListEndOffsets(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("end offsets of %v: %w", topics, err)
	}
	left := map[string]map[int32]int64{}
	offs.Each(func(o kadm.ListedOffset) {
		if o.Err == nil && o.Offset > 0 {
			if left[o.Topic] == nil {
				left[o.Topic] = map[int32]int64{}
			}
			left[o.Topic][o.Partition] = o.Offset
		}
	})
	var out []*kgo.Record
	for !reached(left) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return out, fmt.Errorf("read %v: %w (have %d records, partitions left %v)", topics, ctx.Err(), len(out), left)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if end, ok := left[r.Topic][r.Partition]; ok && r.Offset+1 >= end {
				delete(left[r.Topic], r.Partition)
			}
			if !r.Attrs.IsControl() {
				out = append(out, r)
			}
		})
	}
	return out, nil
}

func reached(ends map[string]map[int32]int64) bool {
	for _, m := range ends {
		if len(m) > 0 {
			return false
		}
	}
	return true
}

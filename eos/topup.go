package eos

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kgo"
)

// topUp adds to a poll that returned fewer than MaxPollRecords records
// what one more fetch brings within TopUpWait, for the same transaction.
//
// Why: franz-go holds one fetch response per broker and asks for the next
// only once that one has been polled. The response a poll returns was
// fetched just after the previous poll, so it holds what arrived before
// the previous transaction began; what arrived during that transaction is
// not fetched until now, and would wait for the end of the next
// transaction too: two and a half transaction cycles on average from send
// to commit. Topping up fetches it now, into this transaction: one and a
// half cycles, plus one fetch round trip. Every record polled is in the
// transaction, whose offsets cover both polls, so exactly once holds as
// for one poll.
func (l *Loop) topUp(ctx context.Context, cl *kgo.Client, fetches kgo.Fetches) kgo.Fetches {
	n := fetches.NumRecords()
	if l.cfg.TopUpWait <= 0 || n == 0 || n >= l.cfg.MaxPollRecords || ctx.Err() != nil {
		return fetches
	}
	tctx, cancel := context.WithTimeout(ctx, l.cfg.TopUpWait)
	more := cl.PollRecords(tctx, l.cfg.MaxPollRecords-n)
	cancel()
	if len(more) == 1 && isCtxFetch(more[0]) {
		return fetches // the wait ended with nothing more: not a fetch error
	}
	return mergeFetches(fetches, more)
}

// mergeFetches returns a and then b as one fetch in which every partition
// appears once, its records in the order polled: a step may deal whole
// partitions to parallel workers (the worker does), and a partition split
// over two entries would be numbered out of order.
func mergeFetches(a, b kgo.Fetches) kgo.Fetches {
	var out kgo.Fetch
	type at struct{ t, p int }
	where := map[string]map[int32]at{}
	for _, fs := range []kgo.Fetches{a, b} {
		for _, f := range fs {
			if isCtxFetch(f) {
				continue
			}
			for _, ft := range f.Topics {
				ps, ok := where[ft.Topic]
				if !ok {
					ps = map[int32]at{}
					where[ft.Topic] = ps
				}
				for _, fp := range ft.Partitions {
					w, ok := ps[fp.Partition]
					if !ok {
						ti := len(out.Topics)
						if i, seen := topicIndex(out.Topics, ft.Topic); seen {
							ti = i
						} else {
							out.Topics = append(out.Topics, kgo.FetchTopic{Topic: ft.Topic, TopicID: ft.TopicID})
						}
						ps[fp.Partition] = at{ti, len(out.Topics[ti].Partitions)}
						out.Topics[ti].Partitions = append(out.Topics[ti].Partitions, fp)
						continue
					}
					dst := &out.Topics[w.t].Partitions[w.p]
					dst.Records = append(dst.Records[:len(dst.Records):len(dst.Records)], fp.Records...)
					dst.HighWatermark, dst.LastStableOffset, dst.LogStartOffset = fp.HighWatermark, fp.LastStableOffset, fp.LogStartOffset
					if dst.Err == nil {
						dst.Err = fp.Err
					}
				}
			}
		}
	}
	return kgo.Fetches{out}
}

func topicIndex(ts []kgo.FetchTopic, topic string) (int, bool) {
	for i := range ts {
		if ts[i].Topic == topic {
			return i, true
		}
	}
	return 0, false
}

// isCtxFetch reports whether f is the fetch PollRecords makes up for a
// context that ended.
func isCtxFetch(f kgo.Fetch) bool {
	if len(f.Topics) != 1 || len(f.Topics[0].Partitions) != 1 {
		return false
	}
	p := f.Topics[0].Partitions[0]
	return f.Topics[0].Topic == "" && p.Partition == -1 && (errors.Is(p.Err, context.DeadlineExceeded) || errors.Is(p.Err, context.Canceled))
}

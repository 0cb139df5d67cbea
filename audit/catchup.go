package audit

import (
	"context"
	"time"

	"github.com/flakestream/flakestream/eos"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// catchUpBack is how many offsets before the first record to audit a
// catch-up reads at least, to find the number "backwards" compares with
// even when the window holds no record of the partition: a few offsets,
// since transaction markers sit between records.
const catchUpBack = 16

// catchUp brings the detector up to date on the partitions of recs that
// were assigned to this instance since it last audited them. For each, it
// reads (read_committed, outside any transaction and without auditing) the
// records before the first one it is about to audit: from where this
// instance left the partition, or, if it never had it or the offsets moved
// back, from a dup window (plus the allowed skew) before that record's
// timestamp. So a restart or a rebalance does not forget the numbers a
// duplicate would repeat, nor the previous number of each partition.
//
// It is best effort within the catch-up timeout: what it could not read is
// logged, and the audit goes on with what the detector has.
func (a *Auditor) catchUp(ctx context.Context, recs []*kgo.Record) {
	first := map[partKey]*kgo.Record{}
	a.mu.Lock()
	for _, r := range recs {
		k := partKey{r.Topic, r.Partition}
		if a.fresh[k] {
			first[k] = r
			delete(a.fresh, k)
		}
	}
	a.mu.Unlock()
	if len(first) == 0 {
		return
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, a.cfg.catchUpTimeout)
	defer cancel()

	from := map[partKey]int64{}
	floor := map[partKey]int64{} // what the detector has already seen ends below
	var byTime []partKey
	minTs := int64(1<<63 - 1)
	for k, r := range first {
		prev, ok := a.det.last[k]
		switch {
		case ok && prev.offset < r.Offset:
			// Back to a partition this instance had: read on from where
			// it left, directly if that is close (markers, a few
			// records), else no further back than a window.
			lo := prev.offset + 1
			if r.Offset-lo <= catchUpBack {
				if lo < r.Offset {
					from[k] = lo
				}
				continue
			}
			floor[k] = lo
		case ok:
			a.log.Warn("the audit group's offsets moved back behind what this instance audited; auditing those records again (numbers still in the dup window will be flagged duplicate: restart the auditor after resetting offsets)",
				"topic", k.topic, "partition", k.partition, "offset", r.Offset, "audited_up_to", prev.offset)
			a.det.forget(k)
		}
		byTime = append(byTime, k)
		minTs = min(minTs, r.Timestamp.UnixMilli())
	}
	if len(byTime) > 0 {
		a.startsByTime(ctx, byTime, minTs, first, floor, from)
	}
	if len(from) == 0 {
		return
	}
	n := a.readBefore(ctx, from, first)
	a.mu.Lock()
	a.stats.CaughtUp += n
	a.mu.Unlock()
	a.log.Info("caught up on newly assigned partitions", "partitions", len(from), "records", n, "took", time.Since(start).Round(time.Millisecond))
}

// startsByTime sets, in from, where to start reading each partition of
// byTime: a dup window (plus the allowed skew) before minTs, the earliest
// timestamp of the records about to be audited, but no further back than
// floor (what the detector has seen) or than the window can hold, and at
// least catchUpBack offsets before the partition's first record.
func (a *Auditor) startsByTime(ctx context.Context, byTime []partKey, minTs int64, first map[partKey]*kgo.Record, floor, from map[partKey]int64) {
	at := minTs - a.cfg.dupWindow.Milliseconds() - a.cfg.maxSkew.Milliseconds()
	topics := map[string]bool{}
	for _, k := range byTime {
		topics[k.topic] = true
	}
	var offs kadm.ListedOffsets
	cl, err := a.catchUpClient(nil)
	if err == nil {
		offs, err = kadm.NewClient(cl).ListOffsetsAfterMilli(ctx, max(at, 0), keys(topics)...)
		cl.Close()
	}
	if err != nil {
		a.log.Warn("catch-up: cannot find offsets by time; reading only the last records before the first to audit", "err", err)
	}
	for _, k := range byTime {
		o := first[k].Offset
		if lo, ok := offs.Lookup(k.topic, k.partition); err == nil && ok && lo.Err == nil {
			o = lo.Offset
		}
		o = min(o, first[k].Offset-catchUpBack)
		// More than the window can hold would be read for nothing.
		o = max(o, floor[k], first[k].Offset-int64(a.cfg.dupMaxEntries), 0)
		if o < first[k].Offset {
			from[k] = o
		}
	}
}

// readBefore reads each partition of from, starting at its offset, up to
// the offset of its record in first, feeding the detector, and returns how
// many records it observed.
func (a *Auditor) readBefore(ctx context.Context, from map[partKey]int64, first map[partKey]*kgo.Record) int64 {
	parts := map[string]map[int32]kgo.Offset{}
	for k, o := range from {
		if parts[k.topic] == nil {
			parts[k.topic] = map[int32]kgo.Offset{}
		}
		parts[k.topic][k.partition] = kgo.NewOffset().At(o)
	}
	cl, err := a.catchUpClient(parts)
	if err != nil {
		a.log.Warn("catch-up skipped: duplicates of, and backwards steps from, the records before this batch go unflagged", "err", err)
		return 0
	}
	defer cl.Close()
	left := len(from)
	var n int64
	now := a.cfg.now()
	for left > 0 {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			a.log.Warn("catch-up incomplete within the timeout: duplicates of, and backwards steps from, the records it missed go unflagged",
				"partitions_left", left, "timeout", a.cfg.catchUpTimeout)
			return n
		}
		fetches.EachRecord(func(r *kgo.Record) {
			k := partKey{r.Topic, r.Partition}
			end, ok := first[k]
			if !ok || from[k] < 0 {
				return
			}
			if r.Offset >= end.Offset {
				from[k] = -1
				left--
				return
			}
			if !r.Attrs.IsControl() {
				a.det.observe(r, now)
				n++
			}
			// The record just before the first to audit may be a marker
			// or an aborted record, which read_committed never shows: the
			// first record to audit itself, committed, ends the partition.
			if r.Offset == end.Offset-1 {
				from[k] = -1
				left--
			}
		})
	}
	return n
}

// catchUpClient returns a client outside the group that reads the given
// partitions read_committed, markers included (so that an offset held by a
// marker still counts as reached).
func (a *Auditor) catchUpClient(parts map[string]map[int32]kgo.Offset) (*kgo.Client, error) {
	opts := []kgo.Opt{kgo.SeedBrokers(a.cfg.eos.Brokers...), kgo.WithLogger(eos.KgoLogger{L: a.log})}
	if parts != nil {
		opts = append(opts, kgo.ConsumePartitions(parts), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.KeepControlRecords(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	}
	return kgo.NewClient(append(opts, a.cfg.eos.KafkaOpts...)...)
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

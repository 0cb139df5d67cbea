package verify

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/flakestream/flakestream/internal/kafkaacl"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// pendingPoll is how often a wait for the worker reads its group's
// committed offsets.
const pendingPoll = time.Second

// committed are the worker group's committed offsets of the input
// ranges, read before the output's end is listed: a transaction that
// commits after this read is not in the output read, and its records are
// at or after these offsets, so they count as pending, never as lost.
// With wait, it first waits up to wait until the group has committed every
// range to its end. A group that has committed nothing on the inputs
// gives nil and a note: pending cannot be told from lost then.
func committed(ctx context.Context, adm *kadm.Client, group string, ranges []Range, wait time.Duration) (map[string]map[int32]int64, []string, error) {
	deadline := time.Now().Add(wait)
	for {
		offs, err := groupOffsets(ctx, adm, group)
		if err != nil {
			return nil, nil, err
		}
		left := behind(offs, ranges)
		if left == 0 || !time.Now().Before(deadline) {
			if len(offs) == 0 {
				return nil, []string{fmt.Sprintf("group %s has committed nothing on the inputs: a record in neither the output nor the DLQ counts as lost, not pending (is --group the worker's?)", group)}, nil
			}
			var notes []string
			if wait > 0 && left > 0 {
				notes = append(notes, fmt.Sprintf("waited %s for group %s: %d offsets of the range still not committed", wait, group, left))
			}
			return offs, notes, nil
		}
		t := time.NewTimer(min(pendingPoll, time.Until(deadline)))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, nil, ctx.Err()
		case <-t.C:
		}
	}
}

// groupOffsets are group's committed offsets, by topic and partition
// (none for a group that does not exist).
func groupOffsets(ctx context.Context, adm *kadm.Client, group string) (map[string]map[int32]int64, error) {
	resp, err := adm.FetchOffsets(ctx, group)
	if err == nil {
		err = resp.Error()
	}
	if errors.Is(err, kerr.GroupIDNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, kafkaacl.Classify(fmt.Errorf("verify: committed offsets of group %s: %w", group, err), "OffsetFetch",
			kafkaacl.Target{Type: kafkaacl.Group, Name: group, Operation: "DESCRIBE"})
	}
	out := map[string]map[int32]int64{}
	resp.Each(func(o kadm.OffsetResponse) {
		if o.Err == nil && o.At >= 0 {
			if out[o.Topic] == nil {
				out[o.Topic] = map[int32]int64{}
			}
			out[o.Topic][o.Partition] = o.At
		}
	})
	return out, nil
}

// behind is how many offsets of ranges the group has not committed yet.
func behind(offs map[string]map[int32]int64, ranges []Range) int64 {
	var n int64
	for _, r := range ranges {
		at, ok := offs[r.Topic][r.Partition]
		if !ok {
			at = 0
		}
		n += max(r.To-max(at, r.From), 0)
	}
	return n
}

// markPending tells the ledger where each range's pending records begin:
// at the group's committed offset, or at the range's start for a partition
// the group has committed nothing on yet (its worker has not got there).
func markPending(l *Ledger, offs map[string]map[int32]int64, ranges []Range) {
	if offs == nil {
		return
	}
	for _, r := range ranges {
		at, ok := offs[r.Topic][r.Partition]
		if !ok {
			at = 0
		}
		l.Pending(r.Topic, r.Partition, at)
	}
}

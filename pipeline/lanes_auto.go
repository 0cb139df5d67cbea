package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/flakestream/flakestream/eos"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// MaxAutoLanes caps the lanes AutoLanes picks. Measured on a backlog
// (bench/results/lanes.md): the second lane adds 40 to 75% on a 2-core
// machine, the third and fourth up to 20% more, and every lane is one more
// Kafka client; past four, lanes are a choice to make with measurements of
// one's own.
const MaxAutoLanes = 4

// AutoLanes is the lane count of `--lanes auto`: one lane per core the Go
// runtime uses (procs, GOMAXPROCS), no more than the input partitions (a
// lane without a partition idles; partitions <= 0: not known) and no more
// than MaxAutoLanes; at least 1.
func AutoLanes(procs, partitions int) int {
	n := min(procs, MaxAutoLanes)
	if partitions > 0 {
		n = min(n, partitions)
	}
	return max(n, 1)
}

// InputPartitions returns the partitions of s's input topics, added up, as
// the brokers report them. A topic that does not exist yet is an error.
func InputPartitions(ctx context.Context, s eos.Config) (int, error) {
	cl, err := s.NewClient()
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	details, err := kadm.NewClient(cl).ListTopics(ctx, s.Topics...)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, t := range s.Topics {
		d, ok := details[t]
		switch {
		case !ok:
			return 0, fmt.Errorf("input topic %s: not in the metadata", t)
		case d.Err != nil:
			return 0, fmt.Errorf("input topic %s: %w", t, d.Err)
		}
		n += len(d.Partitions)
	}
	return n, nil
}

// RetiredLanes is how far a process looks for lanes it no longer runs:
// the transactional IDs of lanes n to RetiredLanes-1 (and lane 0's
// suffixed ID of older releases) are ended when they hold an open
// transaction.
const RetiredLanes = 16

// retireTimeout bounds the ending of retired lanes' transactions.
const retireTimeout = 30 * time.Second

// retiredIDs are the transactional IDs that a process of n lanes whose lane
// 0 has the ID base does not use but an earlier process under the same
// name may have: base-0 (lane 0's ID before it kept the plain one) and
// base-n to base-(RetiredLanes-1).
func retiredIDs(base string, n int) []string {
	ids := []string{base + "-0"}
	for i := max(n, 1); i < RetiredLanes; i++ {
		ids = append(ids, base+"-"+strconv.Itoa(i))
	}
	return ids
}

// retire ends the open transactions of the lanes that a process under the
// same name ran before and this one does not (after --lanes went down, or
// a crash mid-transaction just before): each such ID is initialised once
// (InitProducerID), which fences its old producer and aborts what it left
// open, as a restart of that lane would. Without it, read_committed
// readers and the partitions' next owner wait for the transaction timeout;
// nothing is lost or duplicated either way, since the open transaction's
// offsets were never committed. An ID with no open transaction is only
// described, not initialised. Errors are logged, never fatal: the timeout
// still ends what is left.
func (ls *Lanes) retire(ctx context.Context) {
	w := ls.workers[0]
	c := w.cfg.eos
	ids := retiredIDs(c.TransactionalID, len(ls.workers))
	ctx, cancel := context.WithTimeout(ctx, retireTimeout)
	defer cancel()
	cl, err := c.NewClient()
	if err != nil {
		w.log.Warn("lanes: cannot check the transactional IDs of retired lanes", "err", err)
		return
	}
	defer cl.Close()
	described, err := describeIDs(ctx, kadm.NewClient(cl), ids)
	if err != nil {
		w.log.Warn("lanes: cannot describe the transactional IDs of retired lanes; an open transaction there ends after its timeout", "err", err)
	}
	for _, id := range ids {
		d, ok := described[id]
		if !ok || d.Err != nil {
			continue
		}
		if !openState(d.State) {
			w.log.Debug("lanes: a retired lane's transactional ID holds no open transaction", "transactional_id", id, "state", d.State)
			continue
		}
		if err := initID(ctx, cl, id, c.TransactionTimeout); err != nil {
			w.log.Warn("lanes: cannot end the open transaction of a retired lane; it ends after its timeout", "transactional_id", id, "err", err)
			continue
		}
		w.log.Info("lanes: ended the open transaction of a lane this process no longer runs", "transactional_id", id, "state", d.State)
	}
}

// describeIDs describes the transactions of ids, again while the
// coordinator answers with a retriable error (on a new cluster its
// transaction log is created by the first request). What is described
// comes back with the last error of the others.
func describeIDs(ctx context.Context, adm *kadm.Client, ids []string) (kadm.DescribedTransactions, error) {
	described := kadm.DescribedTransactions{}
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		d, err := adm.DescribeTransactions(ctx, ids...)
		var again []string
		for _, id := range ids {
			r, ok := d[id]
			switch {
			case ok && (r.Err == nil || !kerr.IsRetriable(r.Err)):
				described[id] = r
			case ok:
				again, err = append(again, id), r.Err
			default:
				again = append(again, id)
			}
		}
		if len(again) == 0 {
			return described, nil
		}
		if err == nil {
			err = fmt.Errorf("no answer for %d transactional IDs", len(again))
		}
		if eos.Sleep(ctx, wait) != nil {
			return described, errors.Join(err, ctx.Err())
		}
		ids = again
	}
}

// openState reports whether a transaction in state s (DescribeTransactions)
// may still hold partitions or offsets open.
func openState(s string) bool {
	switch s {
	case "Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence":
		return true
	}
	return false
}

// initID initialises transactional ID id: the coordinator fences its
// producer and aborts its open transaction (a prepared one completes
// first, which the broker answers with CONCURRENT_TRANSACTIONS until then).
func initID(ctx context.Context, cl *kgo.Client, id string, timeout time.Duration) error {
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID = &id
		req.TransactionTimeoutMillis = int32(timeout / time.Millisecond)
		resp, err := req.RequestWith(ctx, cl)
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		if err == nil || !kerr.IsRetriable(err) && !errors.Is(err, kerr.ConcurrentTransactions) {
			return err
		}
		if eos.Sleep(ctx, wait) != nil {
			return errors.Join(err, ctx.Err())
		}
	}
}

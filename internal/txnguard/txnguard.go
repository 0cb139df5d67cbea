// Package txnguard aborts transactions that a transactional producer's own
// producer ID left open on its output partitions at an older epoch, and that
// its transaction coordinator no longer tracks, before the producer writes
// anything there again.
//
// Why: on Kafka with transactions v2 a coordinator that restarts uncleanly
// can lose the record that a partition was in the open transaction. The
// client's abort then looks empty to the coordinator, which bumps the epoch
// and writes no marker (KAFKA-14563). The partition still holds the old
// epoch's records in an open transaction, and the broker lets the next,
// higher-epoch data join it, so the next COMMIT marker makes the aborted
// records visible to read_committed readers (KAFKA-14055: the transaction
// "would effectively get bundled into the next transaction in the log").
//
// The guard does what `kafka-transactions.sh abort` does by hand: it finds
// the open transaction with DescribeProducers (KIP-664), checks with
// DescribeTransactions that the coordinator does not track it, and writes
// an ABORT marker with WriteTxnMarkers, with the producer epoch and
// coordinator epoch the partition reports. WriteTxnMarkers needs ALTER (or
// CLUSTER_ACTION) on the cluster; without it the guard logs one warning and
// does nothing, so the producer works as it would without the guard.
package txnguard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// MetricName is the counter of aborted orphans, labelled by topic.
const MetricName = "flakestream_txn_orphans_aborted_total"

// ACLCommand is the ACL that lets principal User:X (replace X) run the
// guard: ALTER on the cluster, which Kafka accepts for WriteTxnMarkers
// (KIP-664) in place of the inter-broker CLUSTER_ACTION.
const ACLCommand = "kafka-acls.sh --bootstrap-server BROKER --add --allow-principal User:X --operation Alter --cluster"

var (
	// ErrNotTransactional is returned by Check for a client without a
	// transactional ID: only a transactional producer has orphans to find.
	ErrNotTransactional = errors.New("txnguard: the client has no transactional ID")
)

// Abort is one orphaned transaction the guard aborted.
type Abort struct {
	Topic            string
	Partition        int32
	ProducerID       int64
	Epoch            int16 // the orphan's epoch, as the partition reports it
	CurrentEpoch     int16 // the producer's epoch when the guard ran
	CoordinatorEpoch int32 // written into the marker, as the partition reports it
	StartOffset      int64 // the first offset of the orphaned transaction

	// Committed is set when the guard wrote a COMMIT marker, not an ABORT:
	// the coordinator had committed the orphan's transaction (its last
	// state is CompleteCommit at the epoch after the orphan's), and only
	// the marker on this partition was lost. Aborting it would split a
	// committed transaction: the partitions whose marker landed keep their
	// records, the rest (with the input offsets) would be redone, and the
	// redone records would be duplicates.
	Committed bool
}

// Guard finds and aborts orphaned transactions. A nil *Guard is a guard
// turned off: its Check does nothing. A Guard is safe for concurrent use and
// is meant to live as long as the process, across Kafka clients, so that its
// permission warning is logged once.
type Guard struct {
	log     *slog.Logger
	aborted *prometheus.CounterVec // nil: no metrics
	warned  atomic.Bool
}

// New returns a guard that logs to log (nil: discard) and registers its
// counter MetricName on reg (nil: no metrics). A counter of that name that
// reg already holds (a second Guard on the same registry) is reused.
func New(log *slog.Logger, reg prometheus.Registerer) (*Guard, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	g := &Guard{log: log}
	if reg != nil {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricName,
			Help: "Transactions the producer's own producer ID left open at an older epoch, untracked by the coordinator, that the orphan guard aborted with WriteTxnMarkers.",
		}, []string{"topic"})
		if err := reg.Register(c); err != nil {
			are, ok := errors.AsType[prometheus.AlreadyRegisteredError](err)
			if !ok {
				return nil, fmt.Errorf("txnguard: register %s: %w", MetricName, err)
			}
			if c, ok = are.ExistingCollector.(*prometheus.CounterVec); !ok {
				return nil, fmt.Errorf("txnguard: register %s: a collector of another type holds the name", MetricName)
			}
		}
		g.aborted = c
	}
	return g, nil
}

// Check aborts the orphaned transactions of cl's producer ID on partitions
// (topic -> partitions; nil partitions means all of the topic's) and returns
// them. Call it while cl has no transaction of its own open on those
// partitions: before the first produce of a session and after every aborted
// transaction.
//
// An orphan is an open transaction (DescribeProducers reports a start
// offset) of cl's own producer ID at an epoch below cl's current one, on a
// partition that the coordinator does not list in an open or completing
// transaction of that producer ID. A transaction the coordinator still
// tracks is left to it: it writes the marker itself, and aborting a
// transaction it is committing would lose data.
//
// A missing permission (DescribeProducers needs READ on the topic,
// DescribeTransactions DESCRIBE on the transactional ID, WriteTxnMarkers
// ALTER or CLUSTER_ACTION on the cluster) is logged once as a warning and
// Check returns nil, nil: the producer goes on as without the guard. Any
// other failure is an error: the caller must not produce to a partition
// that may hold an orphan, so it should abort and retry.
func (g *Guard) Check(ctx context.Context, cl *kgo.Client, partitions map[string][]int32) ([]Abort, error) {
	if g == nil || len(partitions) == 0 {
		return nil, nil
	}
	txnID, _ := cl.OptValue(kgo.TransactionalID).(string)
	if txnID == "" {
		return nil, ErrNotTransactional
	}
	if g.aborted != nil {
		// Every checked topic's series exists from the first check, at 0,
		// so that the counter is exported (and rate() works) before the
		// first abort.
		for t := range partitions {
			g.aborted.WithLabelValues(t)
		}
	}
	adm := kadm.NewClient(cl)

	// The coordinator's state is read before our producer ID is loaded:
	// loading it may bump the epoch and overwrite the decision (commit or
	// abort) of the transaction an orphan belongs to.
	st, ok, err := g.coordinatorState(ctx, adm, txnID)
	if err != nil || !ok {
		return nil, err
	}
	pid, epoch, err := cl.ProducerID(ctx)
	if err != nil {
		return nil, fmt.Errorf("txnguard: producer ID of %s: %w", txnID, err)
	}
	candidates, err := g.openOlder(ctx, adm, partitions, pid, epoch)
	if err != nil || len(candidates) == 0 {
		return nil, err
	}
	return g.end(ctx, adm, txnID, st, epoch, candidates)
}

// coordinatorState is what the transaction coordinator says of txnID; ok
// is false (with a nil error) when a missing permission turns the guard
// off.
func (g *Guard) coordinatorState(ctx context.Context, adm *kadm.Client, txnID string) (st kadm.DescribedTransaction, ok bool, err error) {
	txns, err := adm.DescribeTransactions(ctx, txnID)
	if err != nil {
		if g.denied(err, "DescribeTransactions", "DESCRIBE on transactional ID "+txnID) {
			return st, false, nil
		}
		return st, false, fmt.Errorf("txnguard: describe transaction %s: %w", txnID, err)
	}
	st, found := txns[txnID]
	switch {
	case !found:
		return st, false, fmt.Errorf("txnguard: describe transaction %s: no answer for it", txnID)
	case st.Err != nil && errors.Is(st.Err, kerr.TransactionalIDNotFound):
		// The coordinator knows nothing of it: nothing is tracked.
	case st.Err != nil:
		if g.denied(st.Err, "DescribeTransactions", "DESCRIBE on transactional ID "+txnID) {
			return st, false, nil
		}
		return st, false, fmt.Errorf("txnguard: describe transaction %s: %w", txnID, st.Err)
	}
	return st, true, nil
}

// openOlder lists the partitions where producer pid has a transaction open
// at an epoch older than epoch. One request per topic, so that a topic we
// may not READ (often __consumer_offsets) is skipped with the warning and
// the others are still checked.
func (g *Guard) openOlder(ctx context.Context, adm *kadm.Client, partitions map[string][]int32, pid int64, epoch int16) ([]kadm.DescribedProducer, error) {
	var candidates []kadm.DescribedProducer
	for _, t := range slices.Sorted(maps.Keys(partitions)) {
		described, err := adm.DescribeProducers(ctx, topicSet(t, partitions[t]))
		if err != nil {
			if g.denied(err, "DescribeProducers", "READ on topic "+t) {
				continue
			}
			return nil, fmt.Errorf("txnguard: describe producers of %s: %w", t, err)
		}
		for _, dp := range described.SortedPartitions() {
			if dp.Err != nil {
				return nil, fmt.Errorf("txnguard: describe producers of %s[%d]: %w", dp.Topic, dp.Partition, dp.Err)
			}
			if p, ok := dp.ActiveProducers[pid]; ok && p.CurrentTxnStartOffset >= 0 && p.ProducerEpoch < epoch {
				candidates = append(candidates, p)
			}
		}
	}
	return candidates, nil
}

// end writes the marker that ends each candidate the coordinator no longer
// tracks, logs it and counts it.
func (g *Guard) end(ctx context.Context, adm *kadm.Client, txnID string, st kadm.DescribedTransaction, epoch int16, candidates []kadm.DescribedProducer) ([]Abort, error) {
	var aborts []Abort
	var errs []error
	for _, p := range candidates {
		if tracked(st, p) {
			g.log.Info("txnguard: an older transaction of this producer is still open on a partition, but its coordinator tracks it and will finish it",
				"topic", p.Topic, "partition", p.Partition, "producer_id", p.ProducerID, "epoch", p.ProducerEpoch,
				"current_epoch", epoch, "coordinator_state", st.State)
			continue
		}
		a := Abort{Topic: p.Topic, Partition: p.Partition, ProducerID: p.ProducerID, Epoch: p.ProducerEpoch,
			CurrentEpoch: epoch, CoordinatorEpoch: p.CoordinatorEpoch, StartOffset: p.CurrentTxnStartOffset,
			Committed: committed(st, p)}
		err := g.abort(ctx, adm, a)
		switch {
		case err == nil:
		case g.denied(err, "WriteTxnMarkers", "ALTER on the cluster"):
			return aborts, nil
		default:
			errs = append(errs, err)
			continue
		}
		g.log.Warn("txnguard: ended an orphaned transaction of this producer: its coordinator no longer tracked it, and the next commit would have exposed its records",
			"marker", map[bool]string{false: "ABORT", true: "COMMIT"}[a.Committed], "topic", a.Topic, "partition", a.Partition, "producer_id", a.ProducerID, "epoch", a.Epoch,
			"current_epoch", a.CurrentEpoch, "coordinator_epoch", a.CoordinatorEpoch, "start_offset", a.StartOffset,
			"transactional_id", txnID, "coordinator_state", st.State)
		if g.aborted != nil {
			g.aborted.WithLabelValues(a.Topic).Inc()
		}
		aborts = append(aborts, a)
	}
	return aborts, errors.Join(errs...)
}

func topicSet(t string, ps []int32) kadm.TopicsSet {
	s := make(kadm.TopicsSet)
	s.Add(t, ps...)
	return s
}

// tracked reports whether the coordinator lists p's partition in a
// transaction of p's producer ID that is open or being completed.
func tracked(st kadm.DescribedTransaction, p kadm.DescribedProducer) bool {
	if st.Err != nil || st.ProducerID != p.ProducerID {
		return false
	}
	switch st.State {
	case "Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence":
	default:
		return false
	}
	_, ok := st.Topics[p.Topic][p.Partition]
	return ok
}

// committed reports whether the coordinator's last decision was to commit
// p's transaction. With transactions v2 every transaction has an epoch of
// its own and ends at the next one, so CompleteCommit at p's epoch + 1 is
// the end of exactly p's transaction. Anything else (an abort, or a
// decision already overwritten by a later transaction) aborts, as
// kafka-transactions.sh abort does.
func committed(st kadm.DescribedTransaction, p kadm.DescribedProducer) bool {
	return st.Err == nil && st.ProducerID == p.ProducerID && st.State == "CompleteCommit" && st.ProducerEpoch == p.ProducerEpoch+1
}

// abort writes the marker that ends a's transaction on a's partition (ABORT
// unless a.Committed), as kafka-transactions.sh abort does.
func (g *Guard) abort(ctx context.Context, adm *kadm.Client, a Abort) error {
	resp, err := adm.WriteTxnMarkers(ctx, kadm.TxnMarkers{
		ProducerID:       a.ProducerID,
		ProducerEpoch:    a.Epoch,
		Commit:           a.Committed,
		CoordinatorEpoch: a.CoordinatorEpoch,
		Topics:           kadm.TopicsSet{a.Topic: {a.Partition: {}}},
	})
	if err != nil {
		return fmt.Errorf("txnguard: abort producer %d epoch %d on %s[%d]: %w", a.ProducerID, a.Epoch, a.Topic, a.Partition, err)
	}
	r, ok := resp[a.ProducerID].Topics[a.Topic].Partitions[a.Partition]
	if !ok {
		return fmt.Errorf("txnguard: abort producer %d epoch %d on %s[%d]: no answer for the partition", a.ProducerID, a.Epoch, a.Topic, a.Partition)
	}
	if r.Err != nil {
		return fmt.Errorf("txnguard: abort producer %d epoch %d on %s[%d]: %w", a.ProducerID, a.Epoch, a.Topic, a.Partition, r.Err)
	}
	return nil
}

// denied reports whether err is a missing permission, and logs the first
// one as a warning with what to grant.
func (g *Guard) denied(err error, request, need string) bool {
	if !errors.Is(err, kerr.ClusterAuthorizationFailed) && !errors.Is(err, kerr.TopicAuthorizationFailed) &&
		!errors.Is(err, kerr.TransactionalIDAuthorizationFailed) {
		return false
	}
	if g.warned.CompareAndSwap(false, true) {
		g.log.Warn("txnguard: the orphaned-transaction guard is not allowed to run and does nothing: "+
			"a transaction a broker crash left open can then be exposed by the next commit. "+
			"Grant the producer's principal ALTER on the cluster (and READ on its output topics), "+
			"or turn the guard off with --orphan-guard=false to silence this",
			"request", request, "needs", need, "err", err, "acl", ACLCommand)
	}
	return true
}

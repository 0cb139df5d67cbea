// Package txnguard ends the transactions that a transactional producer's own
// producer ID left open on its output partitions and on its group's offsets,
// before the producer writes anything there again, with no right on the
// cluster.
//
// Why: on Kafka a coordinator that restarts uncleanly can lose the record
// that a partition was in the open transaction (KAFKA-14563, KAFKA-20734).
// It then ends the transaction without writing a marker to that partition,
// which still holds the old epoch's records in an open transaction. The
// broker lets the producer's next data there join it, so the next marker
// decides both: the next COMMIT exposes aborted records to read_committed
// readers (duplicates), and an open transaction on __consumer_offsets
// holds the group's offsets unstable, so the group never consumes again.
//
// How, measured on Apache Kafka 4.4.0: any marker of the same producer ID
// at the same or a later epoch ends an open transaction on a partition. So
// the guard runs one transaction of the producer's own transactional ID and
// producer ID, at its current epoch, that adds every partition it is given
// (AddPartitionsToTxn) and the group's offsets partition (AddOffsetsToTxn),
// writes no record, and ends (EndTxn). The coordinator writes that marker
// to every partition: whatever was open there ends with it, and where
// nothing was open the marker is a no-op. Nothing is written that a reader
// sees, and every request is one the producer is allowed anyway: WRITE and
// DESCRIBE on the transactional ID, WRITE on the topics, READ on the group.
// The one right it does not use is the one it used to need: ALTER on the
// cluster, for WriteTxnMarkers, which would let the worker's principal
// create ACLs and reset other users' passwords.
//
// Commit or abort: the marker decides the orphan's fate, so it must be the
// one the orphan's transaction was given. The guard reads the
// coordinator's record of the last transaction (DescribeTransactions)
// before the producer ID is loaded, since loading it may overwrite that
// record. A last transaction that committed (CompleteCommit, or
// PrepareCommit, which the coordinator completes as a commit) is ended with
// COMMIT: its input offsets were committed, and aborting what it left open
// on a partition would lose those records. Anything else is ended with
// ABORT. The guard runs before the first produce of every session and after
// every transaction that did not commit, so an orphan can only belong to
// the last transaction; an orphan older than that (left while the guard was
// off) is ended with the same marker.
//
// The cleanup transaction uses the protocol of transactions v1
// (AddPartitionsToTxn from the client, EndTxn without an epoch bump), over a
// short-lived client of its own: the producer's epoch stays what the
// producer's client knows, and its next transaction (v1 or v2) goes on at
// it.
package txnguard

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flakestream/flakestream/internal/kafkaacl"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"github.com/twmb/franz-go/pkg/sasl"
)

// The guard's metrics. Under least privilege (no READ on the topics) the
// guard cannot list a partition's open transactions, so it cannot say how
// many orphans it ended: its metrics say what it did (the cleanup
// transactions, how they ended, the partitions they covered and whether
// those were inspected) and what it could see (orphans on the topics it may
// READ; a predecessor's transaction still open at the coordinator, which
// DESCRIBE on the transactional ID shows).
const (
	// CleanupsMetric counts the cleanup transactions, by marker (commit,
	// abort) and result (ok, error).
	CleanupsMetric = "flakestream_txn_guard_cleanups_total"
	// PartitionsMetric counts the partitions the cleanup transactions that
	// ended ok covered (each got the marker, which ends whatever was open
	// there), by topic and inspected: "true" where the guard could list
	// the partition's producers first (READ on the topic), "false" where
	// it ended whatever was open unseen.
	PartitionsMetric = "flakestream_txn_guard_partitions_total"
	// OrphansSeenMetric counts the orphans the guard saw before it ended
	// them, by topic: only on inspected partitions.
	OrphansSeenMetric = "flakestream_txn_guard_orphans_seen_total"
	// CoordinatorOpenMetric counts the checks that found the coordinator's
	// last transaction of the transactional ID still open, by its state
	// (Ongoing, PrepareCommit, PrepareAbort): a predecessor died, or lost
	// its session, mid-transaction. Loading the producer ID ends it (the
	// coordinator completes a Prepare* and aborts an Ongoing one); the
	// cleanup then ends what it may have left unlisted. Needs only
	// DESCRIBE on the transactional ID, so it counts under least privilege.
	CoordinatorOpenMetric = "flakestream_txn_guard_coordinator_open_total"
	// MetricName is OrphansSeenMetric's old name, with the same value.
	// Deprecated: it says "aborted", but the guard ends an orphan with
	// COMMIT when its transaction committed, and it counts only what the
	// guard saw; removed in the release after v0.1.0.
	MetricName = "flakestream_txn_orphans_aborted_total"
)

// ConsumerOffsetsTopic is Kafka's topic of committed offsets. A partitions
// map given to Check may name it; the guard ends an orphan there through
// the group (AddOffsetsToTxn), never by topic.
const ConsumerOffsetsTopic = "__consumer_offsets"

var (
	// ErrNotTransactional is returned by Check for a client without a
	// transactional ID: only a transactional producer has orphans to end.
	ErrNotTransactional = errors.New("txnguard: the client has no transactional ID")
)

// Orphan is an open transaction of the producer's own producer ID at an
// older epoch, seen on a partition before the guard ended it.
type Orphan struct {
	Topic       string
	Partition   int32
	Epoch       int16 // the orphan's epoch, as the partition reports it
	StartOffset int64 // the first offset of the orphaned transaction
}

// Result is what one Check did.
type Result struct {
	ProducerID int64
	Epoch      int16 // the producer's current epoch: the cleanup transaction's
	// Commit is set when the cleanup ended with COMMIT (the coordinator's
	// last transaction committed), not ABORT.
	Commit bool
	// CoordinatorState is the coordinator's state of the transactional ID
	// before the producer ID was loaded ("" if it knew nothing of it).
	CoordinatorState string
	// Partitions is how many partitions the cleanup transaction added;
	// Group is the group whose offsets partition it added ("" for none).
	Partitions int
	Group      string
	// Orphans are the orphans seen before the cleanup ended them, on the
	// topics the principal may READ.
	Orphans []Orphan
}

// Marker is "COMMIT" or "ABORT".
func (r Result) Marker() string {
	if r.Commit {
		return "COMMIT"
	}
	return "ABORT"
}

// Guard ends orphaned transactions. A nil *Guard is a guard turned off: its
// Check does nothing. A Guard is safe for concurrent use and is meant to
// live as long as the process, across Kafka clients.
type Guard struct {
	log *slog.Logger
	m   *metrics // nil: no metrics
	now func() time.Time
}

// metrics are the guard's counters (see the metric names).
type metrics struct {
	cleanups, partitions, seen, coordinatorOpen *prometheus.CounterVec
	seenOld                                     *prometheus.CounterVec // MetricName, deprecated
}

// New returns a guard that logs to log (nil: discard) and registers its
// counters (CleanupsMetric, PartitionsMetric, OrphansSeenMetric,
// CoordinatorOpenMetric and the deprecated MetricName) on reg (nil: no
// metrics). Counters of those names that reg already holds (a second Guard
// on the same registry) are reused.
func New(log *slog.Logger, reg prometheus.Registerer) (*Guard, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	g := &Guard{log: log, now: time.Now}
	if reg == nil {
		return g, nil
	}
	m := &metrics{}
	for _, c := range []struct {
		dst        **prometheus.CounterVec
		name, help string
		labels     []string
	}{
		{&m.cleanups, CleanupsMetric, "Cleanup transactions the orphaned-transaction guard ran, by the marker that ended them (commit or abort) and result (ok or error).", []string{"marker", "result"}},
		{&m.partitions, PartitionsMetric, "Partitions the guard's cleanup transactions ended whatever was open on, by topic and inspected (true: the guard could list their producers first, with READ on the topic; false: ended unseen).", []string{"topic", "inspected"}},
		{&m.seen, OrphansSeenMetric, "Transactions this producer's own producer ID left open at an older epoch that the guard saw and ended: only on partitions it could inspect (READ on the topic).", []string{"topic"}},
		{&m.coordinatorOpen, CoordinatorOpenMetric, "Checks that found the coordinator's last transaction of this transactional ID still open (a predecessor died mid-transaction), by its state.", []string{"state"}},
		{&m.seenOld, MetricName, "Deprecated: the same value as " + OrphansSeenMetric + ", under its old name, removed in the release after v0.1.0. It counts only the orphans the guard saw, whatever marker ended them.", []string{"topic"}},
	} {
		v, err := registerCounterVec(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: c.name, Help: c.help}, c.labels), c.name)
		if err != nil {
			return nil, err
		}
		*c.dst = v
	}
	for _, marker := range []string{"commit", "abort"} {
		for _, result := range []string{"ok", "error"} {
			m.cleanups.WithLabelValues(marker, result)
		}
	}
	for _, st := range []string{"Ongoing", "PrepareCommit", "PrepareAbort"} {
		m.coordinatorOpen.WithLabelValues(st)
	}
	g.m = m
	return g, nil
}

// registerCounterVec registers c on reg, or returns the counter of that
// name reg already holds.
func registerCounterVec(reg prometheus.Registerer, c *prometheus.CounterVec, name string) (*prometheus.CounterVec, error) {
	err := reg.Register(c)
	if err == nil {
		return c, nil
	}
	are, ok := errors.AsType[prometheus.AlreadyRegisteredError](err)
	if !ok {
		return nil, fmt.Errorf("txnguard: register %s: %w", name, err)
	}
	if c, ok = are.ExistingCollector.(*prometheus.CounterVec); !ok {
		return nil, fmt.Errorf("txnguard: register %s: a collector of another type holds the name", name)
	}
	return c, nil
}

// Check ends every transaction cl's producer ID may have left open on
// partitions (topic -> partitions; every partition the producer writes to)
// and on the offsets partition of cl's consumer group, with one cleanup
// transaction (see the package comment). Call it while cl has no
// transaction of its own open: before the first produce of a session, and
// after every transaction that did not commit.
//
// Every error means the partitions may still hold an orphan, and the
// caller must not produce: it should retry later. A missing permission
// does not pass by retrying: it is an *AuthError (errors.Is matches the
// Kafka error too), which the caller should treat as fatal.
func (g *Guard) Check(ctx context.Context, cl *kgo.Client, partitions map[string][]int32) (Result, error) {
	if g == nil {
		return Result{}, nil
	}
	txnID, _ := cl.OptValue(kgo.TransactionalID).(string)
	if txnID == "" {
		return Result{}, ErrNotTransactional
	}
	group, _ := cl.OptValue(kgo.ConsumerGroup).(string)
	parts := make(map[string][]int32, len(partitions))
	for t, ps := range partitions {
		if t != ConsumerOffsetsTopic && len(ps) > 0 {
			parts[t] = slices.Sorted(slices.Values(ps))
		}
	}
	if g.m != nil {
		// Every checked topic's series exists from the first check, at 0,
		// so that the counters are exported (and rate() works) before the
		// first orphan.
		for t := range parts {
			g.m.seen.WithLabelValues(t)
			g.m.seenOld.WithLabelValues(t)
			g.m.partitions.WithLabelValues(t, "true")
			g.m.partitions.WithLabelValues(t, "false")
		}
	}
	adm := kadm.NewClient(cl)

	// The coordinator's record is read before our producer ID is loaded:
	// loading it may bump the epoch and overwrite the decision (commit or
	// abort) of the transaction an orphan belongs to.
	st, err := coordinatorState(ctx, adm, txnID)
	if err != nil {
		return Result{}, err
	}
	pid, epoch, err := cl.ProducerID(ctx)
	if err != nil {
		return Result{}, kafkaacl.Classify(fmt.Errorf("txnguard: producer ID of %s: %w", txnID, err), "InitProducerId", kafkaacl.Target{Type: kafkaacl.TransactionalID, Name: txnID, Operation: "WRITE"})
	}
	if open := coordinatorOpen(st); open && g.m != nil {
		g.m.coordinatorOpen.WithLabelValues(st.State).Inc()
	}
	res := Result{ProducerID: pid, Epoch: epoch, Commit: lastCommitted(st, pid), CoordinatorState: st.State, Group: group}
	for _, ps := range parts {
		res.Partitions += len(ps)
	}
	var inspected map[string]bool
	res.Orphans, inspected = g.seen(ctx, adm, parts, pid, epoch)
	if res.Partitions == 0 && group == "" {
		return res, nil
	}
	marker := strings.ToLower(res.Marker())
	if err := g.cleanup(ctx, cl, txnID, pid, epoch, group, parts, res.Commit); err != nil {
		if g.m != nil {
			g.m.cleanups.WithLabelValues(marker, "error").Inc()
		}
		return res, err
	}
	if g.m != nil {
		g.m.cleanups.WithLabelValues(marker, "ok").Inc()
		for t, ps := range parts {
			g.m.partitions.WithLabelValues(t, strconv.FormatBool(inspected[t])).Add(float64(len(ps)))
		}
	}
	for _, o := range res.Orphans {
		g.log.Warn("txnguard: ended an orphaned transaction of this producer: its coordinator had lost it, and the next commit would have exposed its records",
			"marker", res.Marker(), "topic", o.Topic, "partition", o.Partition, "producer_id", pid, "epoch", o.Epoch,
			"current_epoch", epoch, "start_offset", o.StartOffset, "transactional_id", txnID, "coordinator_state", st.State)
		if g.m != nil {
			g.m.seen.WithLabelValues(o.Topic).Inc()
			g.m.seenOld.WithLabelValues(o.Topic).Inc()
		}
	}
	g.log.Debug("txnguard: ended whatever this producer had left open", "marker", res.Marker(), "partitions", res.Partitions,
		"group", group, "producer_id", pid, "epoch", epoch, "transactional_id", txnID, "coordinator_state", st.State)
	return res, nil
}

// coordinatorState is what the transaction coordinator says of txnID (the
// zero state if it knows nothing of it).
func coordinatorState(ctx context.Context, adm *kadm.Client, txnID string) (kadm.DescribedTransaction, error) {
	txns, err := adm.DescribeTransactions(ctx, txnID)
	if err != nil {
		return kadm.DescribedTransaction{}, kafkaacl.Classify(fmt.Errorf("txnguard: describe transaction %s: %w", txnID, err),
			"DescribeTransactions", kafkaacl.Target{Type: kafkaacl.TransactionalID, Name: txnID, Operation: "DESCRIBE"})
	}
	st, found := txns[txnID]
	switch {
	case !found:
		return st, fmt.Errorf("txnguard: describe transaction %s: no answer for it", txnID)
	case st.Err != nil && errors.Is(st.Err, kerr.TransactionalIDNotFound):
		return kadm.DescribedTransaction{TxnID: txnID}, nil
	case st.Err != nil:
		return st, kafkaacl.Classify(fmt.Errorf("txnguard: describe transaction %s: %w", txnID, st.Err),
			"DescribeTransactions", kafkaacl.Target{Type: kafkaacl.TransactionalID, Name: txnID, Operation: "DESCRIBE"})
	}
	return st, nil
}

// coordinatorOpen reports whether the coordinator's last transaction of
// the transactional ID was still open when the guard read it.
func coordinatorOpen(st kadm.DescribedTransaction) bool {
	return st.Err == nil && (st.State == "Ongoing" || st.State == "PrepareCommit" || st.State == "PrepareAbort")
}

// lastCommitted reports whether the coordinator's last transaction of
// producer pid committed: its state is CompleteCommit, or PrepareCommit
// (loading the producer ID waits until the coordinator completes it).
func lastCommitted(st kadm.DescribedTransaction, pid int64) bool {
	return st.Err == nil && st.ProducerID == pid && (st.State == "CompleteCommit" || st.State == "PrepareCommit")
}

// seen lists the orphans of producer pid (open at an epoch below epoch) on
// the topics the principal may READ, and which topics it could inspect; a
// topic it may not is skipped silently: the cleanup ends its orphans all
// the same. Any other failure only loses the report, never the cleanup.
func (g *Guard) seen(ctx context.Context, adm *kadm.Client, parts map[string][]int32, pid int64, epoch int16) ([]Orphan, map[string]bool) {
	var out []Orphan
	inspected := map[string]bool{}
	for _, t := range slices.Sorted(maps.Keys(parts)) {
		s := make(kadm.TopicsSet)
		s.Add(t, parts[t]...)
		described, err := adm.DescribeProducers(ctx, s)
		if err != nil {
			if !errors.Is(err, kerr.TopicAuthorizationFailed) {
				g.log.Debug("txnguard: cannot list the producers of a topic; its orphans are ended unseen", "topic", t, "err", err)
			}
			continue
		}
		inspected[t] = true
		for _, dp := range described.SortedPartitions() {
			if dp.Err != nil {
				inspected[t] = false
				continue
			}
			if p, ok := dp.ActiveProducers[pid]; ok && p.CurrentTxnStartOffset >= 0 && p.ProducerEpoch < epoch {
				out = append(out, Orphan{Topic: dp.Topic, Partition: dp.Partition, Epoch: p.ProducerEpoch, StartOffset: p.CurrentTxnStartOffset})
			}
		}
	}
	return out, inspected
}

// concurrentWait bounds the wait for the coordinator to finish the
// previous transaction's markers (CONCURRENT_TRANSACTIONS).
const concurrentWait = 15 * time.Second

// cleanup runs the cleanup transaction of producer pid at epoch: it adds
// parts and group's offsets partition, and ends with COMMIT if commit, else
// ABORT.
func (g *Guard) cleanup(ctx context.Context, cl *kgo.Client, txnID string, pid int64, epoch int16, group string, parts map[string][]int32, commit bool) error {
	raw, err := rawClient(cl)
	if err != nil {
		return fmt.Errorf("txnguard: cleanup client: %w", err)
	}
	defer raw.Close()
	if len(parts) > 0 {
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch = txnID, pid, epoch
		for _, t := range slices.Sorted(maps.Keys(parts)) {
			rt := kmsg.NewAddPartitionsToTxnRequestTopic()
			rt.Topic, rt.Partitions = t, parts[t]
			req.Topics = append(req.Topics, rt)
		}
		if err := g.concurrent(ctx, func() error { return addPartitions(ctx, raw, req) }); err != nil {
			return err
		}
	}
	if group != "" {
		req := kmsg.NewPtrAddOffsetsToTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = txnID, pid, epoch, group
		err := g.concurrent(ctx, func() error {
			resp, err := req.RequestWith(ctx, raw)
			if err == nil {
				err = kerr.ErrorForCode(resp.ErrorCode)
			}
			return err
		})
		if err != nil {
			return kafkaacl.Classify(fmt.Errorf("txnguard: add the offsets of group %s to the cleanup transaction: %w", group, err), "AddOffsetsToTxn",
				kafkaacl.Target{Type: kafkaacl.Group, Name: group, Operation: "READ"}, kafkaacl.Target{Type: kafkaacl.TransactionalID, Name: txnID, Operation: "WRITE"})
		}
	}
	end := kmsg.NewPtrEndTxnRequest()
	end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = txnID, pid, epoch, commit
	resp, err := end.RequestWith(ctx, raw)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		return kafkaacl.Classify(fmt.Errorf("txnguard: end the cleanup transaction of producer %d epoch %d: %w", pid, epoch, err), "EndTxn", kafkaacl.Target{Type: kafkaacl.TransactionalID, Name: txnID, Operation: "WRITE"})
	}
	return nil
}

// addPartitions sends req and returns the first partition's error, if any.
func addPartitions(ctx context.Context, raw *kgo.Client, req *kmsg.AddPartitionsToTxnRequest) error {
	resp, err := req.RequestWith(ctx, raw)
	if err != nil {
		return kafkaacl.Classify(fmt.Errorf("txnguard: add partitions to the cleanup transaction: %w", err), "AddPartitionsToTxn", kafkaacl.Target{Type: kafkaacl.TransactionalID, Name: req.TransactionalID, Operation: "WRITE"})
	}
	var firstOther error
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			perr := kerr.ErrorForCode(p.ErrorCode)
			switch {
			case perr == nil, errors.Is(perr, kerr.OperationNotAttempted):
				continue
			case kafkaacl.Is(perr):
				// A refusal ends the check at once: retrying cannot fix it.
				return kafkaacl.Classify(fmt.Errorf("txnguard: add %s[%d] to the cleanup transaction: %w", t.Topic, p.Partition, perr), "AddPartitionsToTxn",
					kafkaacl.Target{Type: kafkaacl.Topic, Name: t.Topic, Operation: "WRITE"}, kafkaacl.Target{Type: kafkaacl.TransactionalID, Name: req.TransactionalID, Operation: "WRITE"})
			case firstOther == nil:
				firstOther = fmt.Errorf("txnguard: add %s[%d] to the cleanup transaction: %w", t.Topic, p.Partition, perr)
			}
		}
	}
	return firstOther
}

// concurrent runs try until it does not fail with CONCURRENT_TRANSACTIONS
// (the coordinator is still writing the previous transaction's markers), up
// to concurrentWait.
func (g *Guard) concurrent(ctx context.Context, try func() error) error {
	deadline := g.now().Add(concurrentWait)
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, 500*time.Millisecond) {
		err := try()
		if !errors.Is(err, kerr.ConcurrentTransactions) || !g.now().Before(deadline) {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// rawClient is a client that reaches cl's brokers as cl does (addresses,
// TLS, SASL, dialer), speaks the protocol of transactions v1 (so its EndTxn
// does not bump the epoch that cl knows), and has no group, no
// transactional ID and nothing to consume: the guard's requests name the
// transactional ID themselves.
func rawClient(cl *kgo.Client) (*kgo.Client, error) {
	opts := []kgo.Opt{kgo.MaxVersions(kversion.V3_8_0())}
	if seeds, ok := cl.OptValue(kgo.SeedBrokers).([]string); ok {
		opts = append(opts, kgo.SeedBrokers(seeds...))
	}
	if id, ok := cl.OptValue(kgo.ClientID).(string); ok && id != "" {
		opts = append(opts, kgo.ClientID(id))
	}
	if l, ok := cl.OptValue(kgo.WithLogger).(kgo.Logger); ok && l != nil {
		opts = append(opts, kgo.WithLogger(l))
	}
	// franz-go takes a TLS configuration or a dialer, not both.
	if tc, ok := cl.OptValue(kgo.DialTLSConfig).(*tls.Config); ok && tc != nil {
		opts = append(opts, kgo.DialTLSConfig(tc.Clone()))
	} else if d, ok := cl.OptValue(kgo.Dialer).(func(context.Context, string, string) (net.Conn, error)); ok && d != nil {
		opts = append(opts, kgo.Dialer(d))
	}
	if ms, ok := cl.OptValue(kgo.SASL).([]sasl.Mechanism); ok && len(ms) > 0 {
		opts = append(opts, kgo.SASL(ms...))
	}
	return kgo.NewClient(opts...)
}

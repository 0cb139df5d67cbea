package eos

import (
	"errors"
	"fmt"

	"github.com/flakestream/flakestream/internal/kafkaacl"
	"github.com/twmb/franz-go/pkg/kerr"
)

// errRestartSession asks for a new Kafka client and session.
var errRestartSession = errors.New("pipeline: kafka session must be restarted")

// FetchError is a fetch of one partition that failed. Fatal ones reach the
// caller wrapped in ErrFatal; the others are logged and retried.
type FetchError struct {
	Topic     string
	Partition int32
	Err       error
}

func (e *FetchError) Error() string {
	return fmt.Sprintf("fetch %s[%d]: %v", e.Topic, e.Partition, e.Err)
}

// Unwrap returns the Kafka error, so errors.Is(err, kerr.X) holds.
func (e *FetchError) Unwrap() error { return e.Err }

// IsFatalKafka reports whether a Kafka error cannot pass by retrying:
// authorization and authentication.
//
// Neither INVALID_PRODUCER_EPOCH nor PRODUCER_FENCED is fatal. A broker
// returns INVALID_PRODUCER_EPOCH when the producer's own abort has just
// bumped its epoch under the same producer ID (transactions v2, seen after
// a broker was killed mid-commit). It returns PRODUCER_FENCED when the
// epoch moved on while this producer hung: the transaction coordinator
// timed out its transaction (a partition longer than --txn-timeout, a
// paused process, which then resumes as a zombie), or another instance
// with the same transactional ID started. Either way the fenced session can
// do nothing more, but the process can: ending a transaction with either
// error replaces the session, and the new client initializes the producer
// ID again (which fences and aborts whatever the old one left open),
// rejoins the group, and starts again from the committed offsets, as Kafka
// Streams does after a fence. Exactly once holds, since nothing of the
// fenced transaction is ever committed. Two live instances that share a
// transactional ID (a misconfiguration) fence each other in turn; each
// fence is logged with that hint, and once they come too often (see
// Fences) one of the two ends with a SharedIDError.
func IsFatalKafka(err error) bool {
	return errors.Is(err, kerr.TopicAuthorizationFailed) || errors.Is(err, kerr.GroupAuthorizationFailed) ||
		errors.Is(err, kerr.TransactionalIDAuthorizationFailed) || errors.Is(err, kerr.ClusterAuthorizationFailed) ||
		errors.Is(err, kerr.SaslAuthenticationFailed)
}

// txnError classifies an error from beginning or ending a transaction (op),
// or from a produce in it: a refused right is fatal, with the one line
// that names it (ending a transaction commits the group's offsets: READ on
// the group and the input), anything else (fencing included, see
// IsFatalKafka) asks for a new session.
func (l *Loop) txnError(op string, err error) error {
	txnID := l.cfg.TransactionalID
	if IsFatalKafka(err) {
		targets := []kafkaacl.Target{l.txnTarget(), {Type: kafkaacl.Group, Name: l.cfg.Group, Operation: "READ"}}
		if len(l.cfg.Topics) == 1 {
			targets = append(targets, kafkaacl.Target{Type: kafkaacl.Topic, Name: l.cfg.Topics[0], Operation: "READ"})
		}
		return fmt.Errorf("%w: %w", ErrFatal, kafkaacl.Classify(fmt.Errorf("%s: %w", op, err), op, targets...))
	}
	if errors.Is(err, kerr.ProducerFenced) {
		return fmt.Errorf("%w: %s: %w (the broker fenced transactional ID %q: its transaction timed out while this process hung, "+
			"or another instance uses the same ID; a new session rejoins)", errRestartSession, op, err, txnID)
	}
	return fmt.Errorf("%w: %s: %w", errRestartSession, op, err)
}

// txnTarget is the right every transaction needs: WRITE on the
// transactional ID.
func (l *Loop) txnTarget() kafkaacl.Target {
	return kafkaacl.Target{Type: kafkaacl.TransactionalID, Name: l.cfg.TransactionalID, Operation: "WRITE"}
}

// coordinatorStarting reports whether err says that a coordinator is not
// ready yet: not elected (COORDINATOR_NOT_AVAILABLE, as on a fresh cluster
// before its transaction-state topic exists), still loading
// (COORDINATOR_LOAD_IN_PROGRESS), or moved (NOT_COORDINATOR).
func coordinatorStarting(err error) bool {
	return errors.Is(err, kerr.CoordinatorNotAvailable) || errors.Is(err, kerr.CoordinatorLoadInProgress) ||
		errors.Is(err, kerr.NotCoordinator)
}

// producerGone reports whether err says that the client's producer ID and
// epoch are no longer the coordinator's: the client cannot use them again,
// and only a new client (a new InitProducerID) can.
func producerGone(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch) ||
		errors.Is(err, kerr.InvalidProducerIDMapping)
}

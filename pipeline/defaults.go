package pipeline

import (
	"time"

	"github.com/flakestream/flakestream/internal/eos"
)

// Defaults of the worker (the ones it shares with the auditor come from
// internal/eos, the loop both run on). The CLI's flags show these, and
// a zero option means them; each is defined here once.
const (
	// DefaultBroker is the seed broker used when none is given.
	DefaultBroker = "127.0.0.1:9092"
	// DefaultGroup is the worker's consumer group.
	DefaultGroup = "flakestream"
	// DefaultStartOffset is where a group with no committed offsets starts:
	// the earliest offset, so no order is skipped.
	DefaultStartOffset = StartEarliest
	// DefaultMaxPollRecords bounds the records of one transaction.
	DefaultMaxPollRecords = eos.DefaultMaxPollRecords
	// DefaultMaxBufferedRecords bounds the records buffered for producing.
	DefaultMaxBufferedRecords = 100000
	// DefaultFetchMaxBytes bounds the bytes of one fetch response.
	DefaultFetchMaxBytes = 32 << 20
	// DefaultTransactionTimeout is how long read_committed readers wait
	// behind an instance that died mid-transaction and never came back.
	DefaultTransactionTimeout = eos.DefaultTransactionTimeout
	// DefaultSessionTimeout is how long the group waits for a dead member.
	DefaultSessionTimeout = eos.DefaultSessionTimeout
	// DefaultShutdownTimeout bounds finishing the open transaction and
	// leaving the group after a signal.
	DefaultShutdownTimeout = eos.DefaultShutdownTimeout
	// DefaultTopicWait bounds the wait at start for topics that do not
	// exist yet.
	DefaultTopicWait = eos.DefaultTopicWait
	// DefaultTopUpWait bounds the worker's second poll into a
	// transaction whose first poll was short.
	DefaultTopUpWait = 5 * time.Millisecond
	// DefaultOnRepeat is what happens to a record whose idempotency key
	// already has a number: it is emitted with that number.
	DefaultOnRepeat = "emit"
)

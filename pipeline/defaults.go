package pipeline

import "time"

// Defaults of the worker's own options (the ones every product of the
// loop shares are package loop's). The CLI's flags show these, and a zero
// option means them; each is defined here once.
const (
	// DefaultGroup is the worker's consumer group.
	DefaultGroup = "flakestream"
	// DefaultStartOffset is where a group with no committed offsets starts:
	// the earliest offset, so no order is skipped.
	DefaultStartOffset = StartEarliest
	// DefaultMaxBufferedRecords bounds the records buffered for producing.
	DefaultMaxBufferedRecords = 100000
	// DefaultFetchMaxBytes bounds the bytes of one fetch response.
	DefaultFetchMaxBytes = 32 << 20
	// DefaultFetchMaxPartitionBytes bounds the bytes of one partition in a
	// fetch response (franz-go's default); lanes divide it.
	DefaultFetchMaxPartitionBytes = 1 << 20
	// DefaultTopUpWait bounds the worker's second poll into a
	// transaction whose first poll was short.
	DefaultTopUpWait = 5 * time.Millisecond
	// DefaultOnRepeat is what happens to a record whose idempotency key
	// already has a number: it is emitted with that number.
	DefaultOnRepeat = "emit"
)

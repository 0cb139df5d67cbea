package pipeline

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/eos"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ErrRefused is what a batch fails with when a record produced alone was
// refused: the transaction aborts, and its retry sends the record to the
// DLQ.
var ErrRefused = errors.New("pipeline: a broker refused a record")

// refusal is how far a record refused at produce has gone, by input
// record. Each refusal moves it one step on, so a record costs at most
// four attempts of its batch (six if, taken alone once, it is refused with
// others again: see rejecter.accepted), and the batch then commits or the
// worker stops with a clear error.
type refusal uint8

const (
	unrefused refusal = iota
	// alone: the record was in a record batch a broker refused along
	// with others, so which one was at fault is unknown; it is produced
	// alone, after everything before it is acknowledged.
	alone
	// rejected: refused alone; it goes to the DLQ, class rejected, alone.
	rejected
	// referenced: its dead letter was refused too; a reference record
	// goes to the DLQ instead, alone.
	referenced
	// hopeless: the DLQ refused even the reference record: Process fails
	// with eos.ErrFatal, since retrying cannot help.
	hopeless
)

// refusedByBroker reports whether err is a refusal of the record itself
// (or of the record batch it was in), which trying the same record again
// cannot fix, as opposed to a passing failure (a broker down, a fenced
// producer, an aborted transaction) or one of the whole transaction.
func refusedByBroker(err error) bool {
	for _, e := range []error{kerr.MessageTooLarge, kerr.RecordListTooLarge, kerr.InvalidRecord,
		kerr.CorruptMessage, kerr.InvalidTimestamp, kerr.PolicyViolation} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// rejecter remembers, between the attempts of a batch, the input records
// whose output a broker (or the producer) refused, so that the next
// attempt sends them on a way that commits. Records are named by their
// source ("topic/partition/offset"), which every record the worker
// produces carries in its flakestream-source header, so the attempts need
// not poll the same batch.
type rejecter struct {
	mu     sync.Mutex
	state  map[string]refusal
	reason map[string]string // the last refusal of each record, for its dead letter
	failed map[string]bool   // refused in the open attempt; true: produced alone
	// cleared are records of state alone that a broker took alone: not
	// at fault, so the next attempt produces them with the others again.
	// clearedOnce holds every record ever cleared: one refused again
	// with others stays alone for good, so attempts stay bounded even if
	// only the company it keeps makes a record batch refused.
	cleared, clearedOnce map[string]bool
	active               atomic.Bool // state is not empty: the batch must look records up
	// tooLarge: a record batch was refused as too large, so a limit
	// learnt at the start of the session no longer holds.
	tooLarge atomic.Bool
	// rerouted: the attempt that just aborted had refused records, which
	// the next attempt sends another way (see Worker.Rerouted).
	rerouted atomic.Bool
}

// maxRefusals bounds the records remembered; past it the oldest
// knowledge is dropped (at worst a record takes its attempts again).
const maxRefusals = 100_000

// OnProduceRecordUnbuffered implements kgo.HookProduceRecordUnbuffered: it
// notes every record a broker or the producer refused.
func (j *rejecter) OnProduceRecordUnbuffered(r *kgo.Record, err error) {
	if err == nil || !refusedByBroker(err) {
		return
	}
	if errors.Is(err, kerr.MessageTooLarge) || errors.Is(err, kerr.RecordListTooLarge) {
		j.tooLarge.Store(true)
	}
	src := lastHeader(r, codec.HeaderSource)
	if src == "" {
		return // not the worker's record
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.failed == nil {
		j.failed = map[string]bool{}
	}
	j.failed[src] = j.failed[src] || (j.state[src] >= alone && !j.cleared[src])
	if j.reason == nil {
		j.reason = map[string]string{}
	}
	j.reason[src] = fmt.Sprintf("%s partition %d refused it: %v", r.Topic, r.Partition, err)
}

// begin starts an attempt.
func (j *rejecter) begin() {
	j.rerouted.Store(false)
	j.mu.Lock()
	clear(j.failed)
	j.mu.Unlock()
}

// aborted moves every record refused in the attempt that just aborted one
// step on. A record refused along with others moves to alone, unless it
// was the only one refused (then it alone was the cause).
func (j *rejecter) aborted() {
	j.mu.Lock()
	defer j.mu.Unlock()
	if len(j.failed) == 0 {
		return
	}
	j.rerouted.Store(true)
	if j.state == nil || len(j.state) > maxRefusals {
		j.state = map[string]refusal{}
		clear(j.cleared)
		clear(j.clearedOnce)
	}
	for src, wasAlone := range j.failed {
		s := j.state[src]
		switch {
		case j.cleared[src]:
			delete(j.cleared, src) // alone again, and for good
		case s == unrefused && !wasAlone && len(j.failed) > 1:
			j.state[src] = alone
		case s < rejected:
			j.state[src] = rejected
		case s < hopeless:
			j.state[src] = s + 1
		}
	}
	clear(j.failed)
	j.active.Store(true)
}

// of returns what happened to the input record named src before, and the
// last refusal's text. A cleared record is unrefused.
func (j *rejecter) of(src []byte) (refusal, string) {
	if !j.active.Load() {
		return unrefused, ""
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.cleared[string(src)] {
		return unrefused, ""
	}
	return j.state[string(src)], j.reason[string(src)]
}

// accepted notes that a broker took record r, produced alone. If it was
// alone for having been in a refused record batch, it was not the cause:
// the next attempt, if the batch aborts again (for the record that was),
// produces it with the others instead of alone again, once. Without this
// every record of a refused record batch costs two round trips of its own,
// one in the attempt that finds the culprit and one in the attempt after.
func (j *rejecter) accepted(r *kgo.Record) {
	if !j.active.Load() {
		return
	}
	src := lastHeader(r, codec.HeaderSource)
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.state[src] != alone || j.clearedOnce[src] {
		return
	}
	if j.cleared == nil {
		j.cleared, j.clearedOnce = map[string]bool{}, map[string]bool{}
	}
	j.cleared[src], j.clearedOnce[src] = true, true
}

// committed forgets the records of a committed batch.
func (j *rejecter) committed(srcs func(yield func(string) bool)) {
	if !j.active.Load() {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	for src := range srcs {
		delete(j.state, src)
		delete(j.reason, src)
		delete(j.cleared, src)
		delete(j.clearedOnce, src)
	}
	if len(j.state) == 0 {
		j.active.Store(false)
	}
}

// hopelessError is the fatal error of a record whose reference record the
// DLQ refused.
func hopelessError(dlq, src, reason string) error {
	return fmt.Errorf("%w: %w: the dead-letter topic %s refuses even the reference record of %s (last: %s): check its configuration (a produce policy, cleanup.policy=compact without keys, max.message.bytes)",
		eos.ErrFatal, ErrRefused, dlq, src, reason)
}

// lastHeader returns the value of the last header named key ("" if none):
// the worker's own headers come after the input's.
func lastHeader(r *kgo.Record, key string) string {
	v, _ := codec.LastHeader(r.Headers, key)
	return string(v)
}

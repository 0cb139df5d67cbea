package pipeline

import (
	"errors"
	"fmt"
	"testing"

	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/eos"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

func refusedRecord(src string) *kgo.Record {
	return &kgo.Record{Topic: "out", Headers: []kgo.RecordHeader{
		{Key: codec.HeaderSource, Value: []byte("forged/0/0")}, // an input's own comes first
		{Key: codec.HeaderSource, Value: []byte(src)}}}
}

// A record refused with others is produced alone; refused alone it is
// rejected; then referenced; then hopeless: at most four attempts, and a
// record refused alone from the start skips the first step. Passing
// failures move nothing, and a commit forgets the batch's records.
func TestRejecterSteps(t *testing.T) {
	var j rejecter
	attempt := func(err error, srcs ...string) {
		j.begin()
		for _, s := range srcs {
			j.OnProduceRecordUnbuffered(refusedRecord(s), err)
		}
		j.aborted()
	}
	state := func(src string) refusal { s, _ := j.of([]byte(src)); return s }

	attempt(kerr.RequestTimedOut, "in/0/1", "in/0/2")
	if j.active.Load() {
		t.Fatal("a passing failure was remembered")
	}
	attempt(fmt.Errorf("wrapped: %w", kerr.PolicyViolation), "in/0/1", "in/0/2")
	if state("in/0/1") != alone || state("in/0/2") != alone || state("forged/0/0") != unrefused {
		t.Fatalf("refused together: %d %d, want alone", state("in/0/1"), state("in/0/2"))
	}
	for _, want := range []refusal{rejected, referenced, hopeless, hopeless} {
		attempt(kerr.InvalidRecord, "in/0/1")
		if got := state("in/0/1"); got != want {
			t.Fatalf("refused again: step %d, want %d", got, want)
		}
	}
	if _, reason := j.of([]byte("in/0/1")); reason == "" {
		t.Fatal("no reason kept for the dead letter")
	}
	attempt(kerr.MessageTooLarge, "in/0/9")
	if state("in/0/9") != rejected || !j.tooLarge.Load() {
		t.Fatalf("refused alone at once: step %d, too large %v; want rejected, true", state("in/0/9"), j.tooLarge.Load())
	}
	j.committed(func(yield func(string) bool) {
		for _, s := range []string{"in/0/1", "in/0/2", "in/0/9"} {
			if !yield(s) {
				return
			}
		}
	})
	if j.active.Load() || state("in/0/1") != unrefused {
		t.Fatal("a committed record is still remembered")
	}
	if err := hopelessError("dlq", "in/0/1", "x"); !errors.Is(err, eos.ErrFatal) || !errors.Is(err, ErrRefused) {
		t.Fatalf("hopeless: %v, want ErrFatal and ErrRefused", err)
	}
}

// A record of a refused record batch that a broker then takes alone is
// not the cause: the next attempt produces it with the others. Refused
// with others again, it stays alone for good, so the attempts stay
// bounded.
func TestRejecterClearsARecordTakenAlone(t *testing.T) {
	var j rejecter
	attempt := func(srcs ...string) {
		j.begin()
		for _, s := range srcs {
			j.OnProduceRecordUnbuffered(refusedRecord(s), kerr.InvalidTimestamp)
		}
		j.aborted()
	}
	state := func(src string) refusal { s, _ := j.of([]byte(src)); return s }

	attempt("in/0/1", "in/0/2", "in/0/3")
	j.accepted(refusedRecord("in/0/1")) // taken alone, before the culprit
	attempt("in/0/2")                   // refused alone: the culprit
	if state("in/0/1") != unrefused || state("in/0/2") != rejected || state("in/0/3") != alone {
		t.Fatalf("after the culprit: %d %d %d, want unrefused, rejected, alone", state("in/0/1"), state("in/0/2"), state("in/0/3"))
	}
	// Refused with others again: alone, and never cleared again.
	attempt("in/0/1", "in/0/3")
	if state("in/0/1") != alone {
		t.Fatalf("a cleared record refused with others: %d, want alone", state("in/0/1"))
	}
	j.accepted(refusedRecord("in/0/1"))
	if state("in/0/1") != alone {
		t.Fatal("a record was cleared twice")
	}
	j.accepted(refusedRecord("in/0/2")) // a dead letter taken alone: still rejected
	if state("in/0/2") != rejected {
		t.Fatalf("a rejected record's dead letter cleared it: %d", state("in/0/2"))
	}
}

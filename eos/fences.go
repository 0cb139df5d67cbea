package eos

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// DefaultFenceLimit is how many fences within the fence window tell two
// live processes on one transactional ID apart from a fence that merely
// happens (see Fences).
const DefaultFenceLimit = 5

// Fences counts the times a process's loops were fenced, within a sliding
// window. A fence on its own is a thing that happens: a restarted instance
// fences its predecessor, a process that hung past the transaction timeout
// is fenced once when it resumes. Two processes that share a transactional
// ID (the same --instance-id) fence each other every time either starts a
// session, over and over; that is the misconfiguration Fences tells apart,
// so that one of them ends with an error saying so instead of both
// retrying forever. The lanes of one process share one Fences, so their
// fences add up. Its zero value is ready; it is safe for concurrent use.
type Fences struct {
	mu    sync.Mutex
	times []time.Time
	now   func() time.Time // replaceable in tests; default time.Now
}

// add records a fence and returns how many fell within window up to now.
func (f *Fences) add(window time.Duration) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now
	if f.now != nil {
		now = f.now
	}
	t := now()
	keep := f.times[:0]
	for _, at := range f.times {
		if t.Sub(at) < window {
			keep = append(keep, at)
		}
	}
	f.times = append(keep, t)
	return len(f.times)
}

// SharedIDError ends a loop whose transactional ID was fenced Fences
// times within Window: another live process uses the same transactional
// ID, so each keeps fencing the other and neither gets on. It wraps
// kerr.ProducerFenced.
type SharedIDError struct {
	TransactionalID string
	InstanceID      string // "" when the transactional ID was given outright
	Fences          int
	Window          time.Duration
}

func (e *SharedIDError) Error() string {
	who := fmt.Sprintf("transactional ID %q", e.TransactionalID)
	if e.InstanceID != "" {
		who += fmt.Sprintf(" (instance ID %q)", e.InstanceID)
	}
	return fmt.Sprintf("%s was fenced %d times within %s: another process is running with the same one, and each keeps fencing the other", who, e.Fences, e.Window)
}

// Unwrap returns kerr.ProducerFenced.
func (e *SharedIDError) Unwrap() error { return kerr.ProducerFenced }

// fenceCheck counts a fence of this loop's producer in the process's
// Fences, and returns a SharedIDError (wrapping ErrFatal) once they
// reach the limit within the window.
func (l *Loop) fenceCheck(err error) error {
	if l.cfg.Mode != Transactional || l.cfg.FenceLimit < 0 || !fenced(err) {
		return nil
	}
	n := l.cfg.Fences.add(l.cfg.FenceWindow)
	if n < l.cfg.FenceLimit {
		return nil
	}
	e := &SharedIDError{TransactionalID: l.cfg.TransactionalID, Fences: n, Window: l.cfg.FenceWindow}
	if id := l.cfg.InstanceID; id != "" && strings.HasSuffix(e.TransactionalID, "-"+id) {
		e.InstanceID = id
	}
	return fmt.Errorf("%w: %w", ErrFatal, e)
}

// fenced reports whether err is a fence of this loop's producer: another
// producer with its transactional ID started, or the coordinator timed
// its transaction out.
func fenced(err error) bool { return errors.Is(err, kerr.ProducerFenced) }

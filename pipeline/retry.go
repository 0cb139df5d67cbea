package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"
)

// retry is the backoff of a consume loop whose batches can fail for passing
// reasons (Redis down, a produce error) or fatal ones. The worker and the
// auditor share it, so both treat failures the same way.
type retry struct {
	min, max, cur time.Duration
	log           *slog.Logger
	last          *atomic.Pointer[error] // the last failure, nil after a success: what Ready reports
	what          string                 // the log line of a failed batch
}

func newRetry(min, max time.Duration, log *slog.Logger, last *atomic.Pointer[error], what string) *retry {
	return &retry{min: min, max: max, cur: min, log: log, last: last, what: what}
}

// after decides what the loop does once a batch ended with err: carry on
// (stop false), possibly after a backoff, or return ret. A fatal error is
// returned; a cancelled ctx ends the loop without error; any other error is
// recorded, logged and waited out, doubling the wait up to max.
func (r *retry) after(ctx context.Context, err error) (stop bool, ret error) {
	switch {
	case err == nil:
		r.cur = r.min
		r.last.Store(nil)
		return false, nil
	case errors.Is(err, ErrFatal):
		return true, err
	case ctx.Err() != nil:
		return true, nil
	}
	r.last.Store(&err)
	r.log.Warn(r.what, "err", err, "retry_in", r.cur)
	if sleep(ctx, r.cur) != nil {
		return true, nil
	}
	r.cur = min(2*r.cur, r.max)
	return false, nil
}

// errRestartSession asks for a new Kafka client and session.
var errRestartSession = errors.New("pipeline: kafka session must be restarted")

// sessions runs session until it ends for any reason but errRestartSession.
// That error means the client could not begin or end a transaction (a
// broker down, a timeout): its state is unknown, so it is replaced, after a
// backoff, and the new one fences whatever the old one left open and starts
// again from the committed offsets, exactly as a restarted process would.
func (r *retry) sessions(ctx context.Context, session func() error) error {
	for {
		err := session()
		if !errors.Is(err, errRestartSession) {
			return err
		}
		if stop, err := r.after(ctx, err); stop {
			return err
		}
	}
}

// txnError classifies an error from beginning or ending a transaction (op):
// fencing and authorization are fatal, anything else asks for a new
// session.
func txnError(op, txnID string, err error) error {
	if isFatalKafka(err) {
		return fmt.Errorf("%w: %s: %v (another instance with transactional ID %q has fenced this one, or it is not authorized)", ErrFatal, op, err, txnID)
	}
	return fmt.Errorf("%w: %s: %v", errRestartSession, op, err)
}

package eos

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"
)

// errRetryAtOnce marks a failed batch whose step reroutes it (Rerouter):
// it is tried again without a backoff.
var errRetryAtOnce = errors.New("eos: retried at once")

// retry is the backoff of the loop, whose batches can fail for passing
// reasons (Redis down, a produce error) or fatal ones.
type retry struct {
	min, max, cur time.Duration
	log           *slog.Logger
	last          *atomic.Pointer[error] // the last failure, nil after a success: what Ready reports
	what          string                 // the log line of a failed batch
	// check, if set, sees every error that replaces the session, and
	// returns a fatal error in its place when it should end the loop.
	check func(error) error
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
	case errors.Is(err, ErrFatal), errors.Is(err, ErrMissingTopic):
		return true, err
	case ctx.Err() != nil:
		return true, nil
	case errors.Is(err, errRetryAtOnce):
		// Nothing to wait for, and nothing wrong with the worker's
		// readiness: the step routes the failed record another way.
		r.log.Info(r.what+" at once, another way", "err", err)
		return false, nil
	}
	r.last.Store(&err)
	r.log.Warn(r.what, "err", err, "retry_in", r.cur)
	if Sleep(ctx, r.cur) != nil {
		return true, nil
	}
	r.cur = min(2*r.cur, r.max)
	return false, nil
}

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
		if r.check != nil {
			if fatal := r.check(err); fatal != nil {
				return fatal
			}
		}
		if stop, err := r.after(ctx, err); stop {
			return err
		}
	}
}

// Sleep waits d or until ctx ends, and then returns ctx.Err().
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

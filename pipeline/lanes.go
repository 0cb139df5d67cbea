package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/flakestream/flakestream/eos"
	"github.com/prometheus/client_golang/prometheus"
)

// Lanes are n workers in one process: n transactional sessions, each its
// own group member with its own transactional ID, numbering from the same
// Numberer. While one lane flushes and commits its transaction, the others
// poll and number, so one process keeps more than one core busy.
//
// Each lane is exactly a Worker, so everything a Worker promises holds per
// lane, and across lanes as across processes: a partition belongs to one
// lane at a time, its records keep their order, and its numbers increase
// (a lane that is assigned a partition forgets the numbers it reserved
// before, as Worker.Assigned does).
//
// With n > 1, lane i (from 0) runs as instance "<instance id>-<i>", with the
// transactional ID "<transactional id>-<i>" when one is given (else the
// default derived from the lane's instance ID), and its metrics carry the
// label lane="<i>". One lane is the plain Worker: its IDs and metrics are
// those of NewWorker.
type Lanes struct {
	workers []*Worker
}

// DefaultLanes is the number of lanes of `flakestream run` without
// --lanes.
const DefaultLanes = 1

// NewLanes validates the settings and options and returns n lanes (n >= 1).
func NewLanes(n int, s eos.Config, opts ...Opt) (*Lanes, error) {
	if n < 1 {
		return nil, fmt.Errorf("%w: lanes %d: want at least 1", eos.ErrBadConfig, n)
	}
	if n == 1 {
		w, err := NewWorker(s, opts...)
		if err != nil {
			return nil, err
		}
		return &Lanes{workers: []*Worker{w}}, nil
	}
	if s.InstanceID == "" {
		s.InstanceID = eos.DefaultInstanceID() // the default, which the lanes suffix
	}
	ls := &Lanes{workers: make([]*Worker, n)}
	// Two processes on one --instance-id fence each other lane by lane;
	// the lanes' fences add up, so that it is told as soon as with one.
	fences := &eos.Fences{}
	for i := range n {
		w, err := NewWorker(s, append(opts[:len(opts):len(opts)], lane(i, fences))...)
		if err != nil {
			return nil, err
		}
		ls.workers[i] = w
	}
	return ls, nil
}

// lane is the last option of lane i: it suffixes the member's IDs, labels
// its metrics and counts its fences in the process's. Only lane 0 tracks
// the group's lag, which every member of the group would report alike.
func lane(i int, fences *eos.Fences) Opt {
	return func(c *cfg) {
		c.eos.Fences = fences
		suffix := "-" + strconv.Itoa(i)
		c.eos.InstanceID += suffix
		if c.eos.TransactionalID != "" {
			c.eos.TransactionalID += suffix
		}
		if c.eos.Registerer != nil {
			c.eos.Registerer = prometheus.WrapRegistererWith(prometheus.Labels{"lane": strconv.Itoa(i)}, c.eos.Registerer)
		}
		c.noLag = i > 0
	}
}

// Run runs every lane until ctx ends or one of them fails; a failure stops
// the others, and Run returns the first error (the others are joined to
// it only when they are not the stop it caused).
func (ls *Lanes) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	errs := make([]error, len(ls.workers))
	var wg sync.WaitGroup
	for i, w := range ls.workers {
		wg.Go(func() {
			errs[i] = w.Run(ctx)
			if errs[i] != nil {
				cancel(errs[i])
			}
		})
	}
	wg.Wait()
	first := context.Cause(ctx)
	if errors.Is(first, context.Canceled) || errors.Is(first, context.DeadlineExceeded) {
		return errors.Join(errs...)
	}
	return first
}

// Ready reports nil once every lane is ready, or why the first that is not
// is not.
func (ls *Lanes) Ready() error {
	for i, w := range ls.workers {
		if err := w.Ready(); err != nil {
			if len(ls.workers) == 1 {
				return err
			}
			return fmt.Errorf("lane %d: %w", i, err)
		}
	}
	return nil
}

// Stats returns the lanes' counts of committed work, summed.
func (ls *Lanes) Stats() Stats {
	var s Stats
	for _, w := range ls.workers {
		ws := w.Stats()
		s.In += ws.In
		s.Numbered += ws.Numbered
		s.Passthrough += ws.Passthrough
		s.DLQ += ws.DLQ
		s.Repeats += ws.Repeats
		s.Dropped += ws.Dropped
		s.Committed += ws.Committed
		s.Aborted += ws.Aborted
	}
	return s
}

// Workers returns the lanes' workers, lane 0 first.
func (ls *Lanes) Workers() []*Worker { return ls.workers }

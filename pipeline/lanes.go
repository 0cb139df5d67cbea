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
// Lane 0 is the plain Worker's member: its instance ID and transactional ID
// are those of NewWorker, so a process that goes from one lane to several
// keeps its first member and fences, with lane 0, whatever the one-lane
// process left open. Lane i > 0 runs as instance "<instance id>-<i>", with
// the transactional ID "<transactional id>-<i>" when one is given (else
// the default derived from the lane's instance ID). With n > 1 every
// lane's metrics carry the label lane="<i>".
//
// Each lane's Kafka client gets a share of the fetch and produce buffers:
// the process's bounds (MaxBufferedRecords, FetchMaxBytes and franz-go's
// per-partition fetch bound) divided by n, so that n lanes buffer about
// what one does.
type Lanes struct {
	workers []*Worker
}

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
		w, err := NewWorker(s, append(opts[:len(opts):len(opts)], lane(i, n, fences))...)
		if err != nil {
			return nil, err
		}
		ls.workers[i] = w
	}
	return ls, nil
}

// lane is the last option of lane i of n: it suffixes the IDs of a member
// other than lane 0, labels its metrics, gives it its share of the
// buffers and counts its fences in the process's. Only lane 0 tracks the
// group's lag, which every member of the group would report alike.
func lane(i, n int, fences *eos.Fences) Opt {
	return func(c *cfg) {
		c.eos.Fences = fences
		c.lanes = n
		if i > 0 {
			suffix := "-" + strconv.Itoa(i)
			c.eos.InstanceID += suffix
			if c.eos.TransactionalID != "" {
				c.eos.TransactionalID += suffix
			}
		}
		if c.eos.Registerer != nil {
			c.eos.Registerer = prometheus.WrapRegistererWith(prometheus.Labels{"lane": strconv.Itoa(i)}, c.eos.Registerer)
		}
		c.noLag = i > 0
	}
}

// Run runs every lane until ctx ends or one of them fails; a failure stops
// the others, and Run returns the first error (the others are joined to
// it only when they are not the stop it caused). Beside the lanes, it ends
// the open transactions of lanes that an earlier process under the same
// name ran and this one does not (see RetiredLanes).
func (ls *Lanes) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	errs := make([]error, len(ls.workers))
	var wg sync.WaitGroup
	wg.Go(func() { ls.retire(ctx) })
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

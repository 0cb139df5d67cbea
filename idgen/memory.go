package idgen

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// MemorySequencer reserves sequence numbers in this process's memory, by
// this process's clock. It is for one process without Redis (the demo, a
// single-instance tool): two processes, or one restarted within the same
// millisecond with the same (server, worker), can issue the same numbers.
// Anything that runs more than one instance must use the RedisSequencer.
//
// It follows the Redis script's rules exactly (see sequencer.lua), so tests
// of one tell about the other.
type MemorySequencer struct {
	now          func() time.Time
	maxAdoptWait time.Duration

	mu     sync.Mutex
	layout layoutState
	keys   map[[2]int64]keyState
}

// layoutState is what both sequencers keep about the layout in force: the
// numbers issued under it all lie at or below millisecond hi, and none may
// be issued before floor.
type layoutState struct {
	id           string
	epoch, shift int64
	floor, hi    int64
}

// keyState is the last millisecond and sequence one (server, worker) issued.
type keyState struct{ ms, seq int64 }

// DefaultMaxAdoptWait is how long a layout change may make a sequencer wait
// before the first number under the new layout can be issued without
// reusing an old one. Changes that need longer are refused.
const DefaultMaxAdoptWait = 2 * time.Second

// NewMemorySequencer returns an in-process sequencer. now is its clock;
// nil means time.Now.
func NewMemorySequencer(now func() time.Time) *MemorySequencer {
	if now == nil {
		now = time.Now
	}
	return &MemorySequencer{now: now, maxAdoptWait: DefaultMaxAdoptWait, keys: make(map[[2]int64]keyState)}
}

// Reserve implements Sequencer.
func (m *MemorySequencer) Reserve(ctx context.Context, req Request) (Block, error) {
	if err := ctx.Err(); err != nil {
		return Block{}, err
	}
	nowUs := m.now().UnixMicro()
	now := floorDiv(nowUs, 1000)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.layout.id != req.LayoutID {
		next, err := adopt(m.layout, req.Layout, req.LayoutID, now, m.maxAdoptWait.Milliseconds())
		if err != nil {
			return Block{}, err
		}
		m.layout = next
	}
	k := [2]int64{req.Server, req.Worker}
	st, ok := m.keys[k]
	if !ok {
		st = keyState{ms: -1, seq: -1}
	}
	if target := max(st.ms, m.layout.floor); now < target {
		return Block{Wait: time.Duration(target*1000-nowUs) * time.Microsecond}, nil
	}
	first := int64(0)
	if now == st.ms {
		if st.seq >= req.Layout.MaxSequence() {
			return Block{Wait: time.Duration((now+1)*1000-nowUs) * time.Microsecond}, nil
		}
		first = st.seq + 1
	}
	count := min(req.N, req.Layout.MaxSequence()-first+1)
	m.keys[k] = keyState{ms: now, seq: first + count - 1}
	m.layout.hi = max(m.layout.hi, now)
	return Block{UnixMs: now, First: first, Count: count}, nil
}

// adopt switches the layout state to a new layout. Every number issued so
// far has its time at or below b = max(now, hi, floor), so under the old
// layout it is at most old.compose(b, all ones). The new layout may issue
// only from the first millisecond whose smallest number is above that, and
// never before b+1, since numbers of other (server, worker) pairs issued in
// b are unknown here. Numbers thus increase across layout changes, and no
// number is issued twice whatever widths or epoch the operator picks; a
// change that would have to wait more than maxWaitMs is refused instead.
func adopt(old layoutState, l Layout, id string, now, maxWaitMs int64) (layoutState, error) {
	next := layoutState{id: id, epoch: l.EpochMs(), shift: int64(l.TimeShift())}
	if old.id == "" {
		return next, nil
	}
	b := max(now, old.hi, old.floor)
	next.floor = max(newLayoutFloor(old.epoch, old.shift, next.epoch, next.shift, b), b+1)
	next.hi = old.hi
	if next.floor-now > maxWaitMs {
		return old, fmt.Errorf("%w: numbers issued under layout %s reach up to %s; layout %s could issue no number above them before %s, over the %dms bound; keep the old layout, or move to new server/worker IDs",
			ErrLayoutChange, old.id, time.UnixMilli(b).UTC().Format(time.RFC3339Nano), id,
			time.UnixMilli(next.floor).UTC().Format(time.RFC3339Nano), maxWaitMs)
	}
	return next, nil
}

// newLayoutFloor is the first Unix millisecond whose smallest number under a
// layout with epoch newE and time shift newShift is above the largest number
// that a layout with oldE and oldShift can give millisecond b. The Lua
// script computes the same thing in doubles; values past 2^53 there only
// arise for floors centuries away, which are refused either way.
func newLayoutFloor(oldE, oldShift, newE, newShift, b int64) int64 {
	e := max(b-oldE, 0)
	var q int64
	if oldShift >= newShift {
		m := int64(1) << (oldShift - newShift)
		if e > (1<<62)/m {
			return 1 << 62
		}
		q = e*m + m - 1
	} else {
		q = e >> (newShift - oldShift)
	}
	return newE + q + 1
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

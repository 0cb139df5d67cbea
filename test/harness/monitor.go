package harness

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Monitor samples a run's progress every SampleEvery: how many input records
// the group has committed (which moves exactly when committed output
// appears, since the worker commits its offsets in the same transaction as
// its output) and how many the input holds. From that timeline:
//
//   - a gap is a time during which input records were waiting (committed <
//     in) and the committed count did not move. It starts at the sample
//     before the first one that sees records waiting (that one saw the count
//     move, or nothing waiting) and ends at the first sample that sees the
//     count move again, so it errs long by at most one sample. A sample that
//     fails (the broker down) counts as no progress with records waiting:
//     a gap runs from the last good sample across the failed ones. A
//     worker that keeps up has gaps of one or two samples;
//   - the longest stall of a run is its longest gap;
//   - a fault's stall is the longest gap that begins between two samples
//     before the fault and 5 s after its end (and before the next fault);
//     its time to recover runs from the fault's end (the worker restarted,
//     Redis or the broker back, the member joined or gone) to the end of
//     that gap: the moment committed output moves again. When that gap is
//     no longer than MinStall (the fault stopped nothing), it is the time
//     from the fault's end to the first sample that sees progress.
//
// The precision is one sample interval plus the time an offset fetch takes.
type Monitor struct {
	e   *Env
	adm *kadm.Client

	mu      sync.Mutex
	samples []sample
	faults  []*Fault

	stop chan struct{}
	done chan struct{}
}

// SampleEvery is the monitor's sampling interval.
const SampleEvery = 100 * time.Millisecond

// MinStall is the shortest gap taken for a fault's doing: shorter ones are
// the ordinary pace of transactions and samples.
const MinStall = 5 * SampleEvery

type sample struct {
	at            time.Time
	committed, in int64
	ok            bool
	// per input partition (nil in the timeline tests' samples)
	partCommitted, partIn map[int32]int64
}

// Fault is one fault injected into a run.
type Fault struct {
	Name     string
	At       time.Time // when it began
	Restored time.Time // when it ended (zero: still going)
}

// StartMonitor starts sampling; Stop ends it.
func (e *Env) StartMonitor(t testing.TB) *Monitor {
	t.Helper()
	// A client of its own, with short timeouts, so that samples during a
	// broker outage fail fast instead of piling up.
	cl := e.Kafka.Client(t, kgo.RequestTimeoutOverhead(2*time.Second), kgo.RetryTimeout(2*time.Second))
	m := &Monitor{e: e, adm: kadm.NewClient(cl), stop: make(chan struct{}), done: make(chan struct{})}
	go m.run()
	t.Cleanup(m.Stop)
	return m
}

func (m *Monitor) run() {
	defer close(m.done)
	tick := time.NewTicker(SampleEvery)
	defer tick.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		pc, pin, err := m.e.CommittedByPartition(ctx, m.adm)
		cancel()
		var c, in int64
		for _, v := range pc {
			c += v
		}
		for _, v := range pin {
			in += v
		}
		m.mu.Lock()
		m.samples = append(m.samples, sample{at: time.Now(), committed: c, in: in, ok: err == nil, partCommitted: pc, partIn: pin})
		m.mu.Unlock()
		select {
		case <-m.stop:
			return
		case <-tick.C:
		}
	}
}

// Stop ends the sampling (idempotent).
func (m *Monitor) Stop() {
	select {
	case <-m.stop:
	default:
		close(m.stop)
	}
	<-m.done
}

// Begin records that a fault begins now; End on the result records that it
// ended.
func (m *Monitor) Begin(name string) *Fault {
	f := &Fault{Name: name, At: time.Now()}
	m.mu.Lock()
	m.faults = append(m.faults, f)
	m.mu.Unlock()
	return f
}

// End records that the fault ended now.
func (m *Monitor) End(f *Fault) {
	m.mu.Lock()
	f.Restored = time.Now()
	m.mu.Unlock()
}

// Instant records a fault that begins and ends at once (a member joining or
// leaving, a kill followed at once by a restart).
func (m *Monitor) Instant(name string) *Fault {
	f := m.Begin(name)
	m.End(f)
	return f
}

// Faults returns the faults recorded so far, in order.
func (m *Monitor) Faults() []Fault {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Fault, len(m.faults))
	for i, f := range m.faults {
		out[i] = *f
	}
	return out
}

// CommittedSince returns the committed count of the first good sample
// taken at or after t, and false while there is none.
func (m *Monitor) CommittedSince(t time.Time) (int64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range m.samples {
		if s.ok && !s.at.Before(t) {
			return s.committed, true
		}
	}
	return 0, false
}

// Committed returns the last committed count sampled.
func (m *Monitor) Committed() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := len(m.samples) - 1; i >= 0; i-- {
		if m.samples[i].ok {
			return m.samples[i].committed
		}
	}
	return 0
}

// PartitionStall is the longest time one input partition had records
// waiting while its committed offset did not move, and which partition:
// what a fault that stops some partitions and not others costs them (a
// paused member whose partitions wait for the group to drop it, while
// another member keeps the group's total moving). Failed samples count as
// no progress, as in the run's stall; the precision is one sample.
func (m *Monitor) PartitionStall() (time.Duration, int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	parts := map[int32]bool{}
	for _, s := range m.samples {
		for p := range s.partIn {
			parts[p] = true
		}
	}
	var worst time.Duration
	var which int32 = -1
	for p := range parts {
		if d := m.partitionWait(p); d > worst {
			worst, which = d, p
		}
	}
	return worst, which
}

// partitionWait is the longest wait of partition p. The caller holds m.mu.
func (m *Monitor) partitionWait(p int32) time.Duration {
	var since, prev time.Time
	var last int64 = -1
	var worst time.Duration
	for _, s := range m.samples {
		if !s.ok {
			if since.IsZero() && !prev.IsZero() {
				since = prev
			}
			continue
		}
		c, in := s.partCommitted[p], s.partIn[p]
		moved := c > last
		if moved && last >= 0 && !since.IsZero() {
			worst = max(worst, s.at.Sub(since))
			since = time.Time{}
		}
		if moved {
			last = c
		}
		if c < in && since.IsZero() {
			since = s.at
			if !moved && !prev.IsZero() {
				since = prev
			}
		}
		prev = s.at
	}
	if !since.IsZero() && prev.After(since) {
		worst = max(worst, prev.Sub(since))
	}
	return worst
}

// Stall is the longest stall of a run.
type Stall struct {
	Length   time.Duration
	From, To time.Time
}

// FaultTiming is one fault and what it cost.
type FaultTiming struct {
	Name        string  `json:"name"`
	AtS         float64 `json:"at_s"`         // seconds after the monitor started
	DurationS   float64 `json:"duration_s"`   // how long the fault lasted
	StallS      float64 `json:"stall_s"`      // the longest gap it began
	RecoverS    float64 `json:"recover_s"`    // from its end until output moved again; -1 if never
	CommittedAt int64   `json:"committed_at"` // input records committed when it began
}

type gap struct{ from, to time.Time }

// Timeline returns the longest stall and what each fault cost.
func (m *Monitor) Timeline() (Stall, []FaultTiming) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.samples) == 0 {
		return Stall{}, nil
	}
	gaps, st, open := m.stalls()
	var out []FaultTiming
	for i := range m.faults {
		out = append(out, m.faultTiming(i, gaps, open))
	}
	return st, out
}

// stalls returns the gaps in which records waited and output did not move,
// the longest of them, and the one still open at the end (the run never
// recovered; zero if none). The caller holds m.mu.
func (m *Monitor) stalls() (gaps []gap, st Stall, open gap) {
	var since time.Time // when the current wait for progress began; zero if nothing waits
	var prev time.Time  // the previous good sample
	var last int64 = -1
	for _, s := range m.samples {
		if !s.ok {
			// Nothing can be seen, so nothing counts as progress: the
			// wait runs from the last good sample.
			if since.IsZero() && !prev.IsZero() {
				since = prev
			}
			continue
		}
		moved := s.committed > last
		if moved && last >= 0 && !since.IsZero() {
			gaps = append(gaps, gap{since, s.at})
			if d := s.at.Sub(since); d > st.Length {
				st = Stall{Length: d, From: since, To: s.at}
			}
			since = time.Time{}
		}
		if moved {
			last = s.committed
		}
		if s.committed < s.in && since.IsZero() {
			// Records wait: since this sample if it saw the count move,
			// else since the previous one, which saw nothing waiting.
			since = s.at
			if !moved && !prev.IsZero() {
				since = prev
			}
		}
		prev = s.at
	}
	// A wait still open at the end (the run never recovered) is a stall
	// up to the last sample.
	if !since.IsZero() && prev.After(since) {
		gaps = append(gaps, gap{since, prev})
		if d := prev.Sub(since); d > st.Length {
			st = Stall{Length: d, From: since, To: prev}
		}
		open = gaps[len(gaps)-1]
	}
	return gaps, st, open
}

// faultTiming is what fault i cost: the worst of gaps it caused, and how
// long after its end output moved again. The caller holds m.mu.
func (m *Monitor) faultTiming(i int, gaps []gap, open gap) FaultTiming {
	f := m.faults[i]
	end := f.Restored
	if end.IsZero() {
		end = f.At
	}
	next := m.samples[len(m.samples)-1].at
	if i+1 < len(m.faults) {
		next = m.faults[i+1].At
	}
	ft := FaultTiming{Name: f.Name, AtS: f.At.Sub(m.samples[0].at).Seconds(), DurationS: end.Sub(f.At).Seconds(), RecoverS: -1}
	for _, s := range m.samples {
		if s.ok && !s.at.After(f.At) {
			ft.CommittedAt = s.committed
		}
	}
	// The gap the fault caused began at most two samples before it (the
	// last progress seen before it) and at most 5s after it ended (a
	// rebalance waits for the next heartbeat; prefetched numbers carry
	// a worker a moment past a Redis outage), before the next fault.
	limit := end.Add(5 * time.Second)
	if next.Before(limit) {
		limit = next
	}
	var worst gap
	for _, g := range gaps {
		if g.from.Before(f.At.Add(-2*SampleEvery)) && !g.to.After(f.At) || !g.from.Before(limit) {
			continue
		}
		if g.to.Sub(g.from) > worst.to.Sub(worst.from) {
			worst = g
		}
	}
	// Gaps of a few samples are a batch's ordinary pace, not a fault.
	if d := worst.to.Sub(worst.from); d > 0 {
		ft.StallS = d.Seconds()
		if worst == open {
			return ft // never recovered
		}
		if d > MinStall && worst.to.After(end) {
			ft.RecoverS = worst.to.Sub(end).Seconds()
		}
	}
	if ft.RecoverS < 0 {
		// The gap ended before the fault did (or none): the first
		// progress after its end.
		ft.RecoverS = m.recoveredAfter(end)
	}
	return ft
}

// recoveredAfter is how many seconds after end the committed count first
// moved past what it was at end; -1 if it never did. The caller holds m.mu.
func (m *Monitor) recoveredAfter(end time.Time) float64 {
	base := int64(-1)
	for _, s := range m.samples {
		if !s.ok {
			continue
		}
		if !s.at.After(end) || base < 0 {
			base = s.committed
			continue
		}
		if s.committed > base {
			return s.at.Sub(end).Seconds()
		}
	}
	return -1
}

// WriteCSV writes the samples as CSV (seconds into the run, committed, in,
// ok) and the faults as comment lines, for plotting a run.
func (m *Monitor) WriteCSV(path string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.samples) == 0 {
		return nil
	}
	var b strings.Builder
	origin := m.samples[0].at
	for _, f := range m.faults {
		fmt.Fprintf(&b, "# fault %q at %.3f until %.3f\n", f.Name, f.At.Sub(origin).Seconds(), f.Restored.Sub(origin).Seconds())
	}
	b.WriteString("t_s,committed,in,ok\n")
	for _, s := range m.samples {
		fmt.Fprintf(&b, "%.3f,%d,%d,%v\n", s.at.Sub(origin).Seconds(), s.committed, s.in, s.ok)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

package harness

import (
	"math"
	"testing"
	"time"
)

// timeline builds a monitor from a script of samples: every 100 ms from
// t0, committed and in at each step (ok=false where failed is true).
func timeline(t0 time.Time, committed, in []int64, failed map[int]bool) *Monitor {
	m := &Monitor{}
	for i := range committed {
		m.samples = append(m.samples, sample{at: t0.Add(time.Duration(i) * SampleEvery), committed: committed[i], in: in[i], ok: !failed[i]})
	}
	return m
}

func ramp(from, step int64, n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = from + int64(i)*step
	}
	return out
}

func near(got, want float64) bool { return math.Abs(got-want) < 0.011 }

func TestTimeline(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	cases := []struct {
		name                string
		committed, in       []int64
		failed              map[int]bool
		faultAt, faultEnd   float64
		stall, recov, fstal float64
	}{
		{
			// The worker keeps up: committed moves every sample. No gap
			// is longer than one sample; a fault that stopped nothing
			// recovers at the next sample.
			name:      "healthy",
			committed: ramp(0, 100, 30), in: ramp(50, 100, 30),
			faultAt: 1.0, faultEnd: 1.0,
			stall: 0.1, recov: 0.1, fstal: 0.1,
		},
		{
			// Killed at 1.0 s and restarted at once; nothing is committed
			// from 1.0 s until 2.5 s while orders keep arriving.
			name:      "kill",
			committed: append(ramp(0, 100, 11), append(repeat(1000, 14), ramp(1100, 100, 10)...)...),
			in:        ramp(50, 100, 35),
			faultAt:   1.0, faultEnd: 1.0,
			stall: 1.5, recov: 1.5, fstal: 1.5,
		},
		{
			// Down from 1.0 to 2.0 s: the samples fail (a broker outage)
			// and count as no progress; output moves again at 2.3 s.
			name:      "outage",
			committed: append(ramp(0, 100, 11), append(repeat(1000, 12), ramp(1100, 100, 10)...)...),
			in:        ramp(50, 100, 33),
			failed:    map[int]bool{11: true, 12: true, 13: true, 14: true, 15: true, 16: true, 17: true, 18: true, 19: true, 20: true},
			faultAt:   1.0, faultEnd: 2.0,
			stall: 1.3, recov: 0.3, fstal: 1.3,
		},
		{
			// Caught up (nothing waiting) when the broker goes down at
			// 1.0 s; the samples fail until 2.0 s, and the first good one
			// already sees progress: the outage is still a gap.
			name:      "outage while caught up",
			committed: append(ramp(0, 100, 11), ramp(1100, 100, 22)...),
			in:        append(ramp(0, 100, 11), ramp(1200, 100, 22)...),
			failed:    map[int]bool{11: true, 12: true, 13: true, 14: true, 15: true, 16: true, 17: true, 18: true, 19: true, 20: true},
			faultAt:   1.0, faultEnd: 2.0,
			stall: 1.1, recov: 0.1, fstal: 1.1,
		},
		{
			// Output stops at 1.0 s and never moves again: the open gap is
			// the longest stall, and the fault never recovers.
			name:      "never",
			committed: append(ramp(0, 100, 11), repeat(1000, 20)...),
			in:        ramp(50, 100, 31),
			faultAt:   1.0, faultEnd: 1.0,
			stall: 2.0, recov: -1, fstal: 2.0,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := timeline(t0, c.committed, c.in, c.failed)
			m.faults = []*Fault{{Name: c.name, At: at(c.faultAt), Restored: at(c.faultEnd)}}
			st, fts := m.Timeline()
			if !near(st.Length.Seconds(), c.stall) {
				t.Errorf("longest stall %.3fs, want %.1fs", st.Length.Seconds(), c.stall)
			}
			if len(fts) != 1 {
				t.Fatalf("%d faults", len(fts))
			}
			if f := fts[0]; !near(f.RecoverS, c.recov) || !near(f.StallS, c.fstal) {
				t.Errorf("fault: stall %.3fs recover %.3fs, want stall %.1fs recover %.1fs", f.StallS, f.RecoverS, c.fstal, c.recov)
			}
		})
	}
}

func repeat(v int64, n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// One partition stops for 2 s while another keeps the total moving: the
// run's stall misses it, the partition stall does not.
func TestPartitionStall(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	m := &Monitor{}
	for i := range 40 {
		c0 := int64(i * 10) // partition 0 keeps up
		c1 := int64(i * 10) // partition 1 stops from 1.0 s to 3.0 s
		if i >= 10 && i < 30 {
			c1 = 100
		}
		pc := map[int32]int64{0: c0, 1: c1}
		pin := map[int32]int64{0: c0 + 5, 1: int64(i*10) + 5}
		m.samples = append(m.samples, sample{at: t0.Add(time.Duration(i) * SampleEvery), committed: c0 + c1, in: pin[0] + pin[1],
			ok: true, partCommitted: pc, partIn: pin})
	}
	st, _ := m.Timeline()
	if st.Length > 2*SampleEvery {
		t.Fatalf("run stall %s: the total kept moving", st.Length)
	}
	d, p := m.PartitionStall()
	if p != 1 || !near(d.Seconds(), 2.0) {
		t.Fatalf("partition stall %s of partition %d, want 2.0s (from its last move, at 1.0 s, to its next, at 3.0 s) of partition 1", d, p)
	}
}

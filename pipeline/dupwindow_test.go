package pipeline

import (
	"runtime"
	"testing"
	"time"

	"github.com/flakestream/flakestream/idgen"
)

// dupBytesPerEntry is the stated bound on what one number costs in the dup
// window under the default layout: a 4-byte slot in a table at least 3/8
// full (tables double at 3/4), so at most 32/3 = 10.7 bytes, plus, per
// bucket in use, a table of at least 16 slots and the ring's ~100 bytes.
const dupBytesPerEntry = 32.0 / 3

// stream composes the i-th number of a stream of rate numbers per ms from
// four (server, worker) pairs, starting at Unix ms start.
func stream(l idgen.Layout, start int64, rate, i int) int64 {
	ms := start + int64(i/rate) - l.EpochMs()
	pair := int64(i % 4)
	seq := int64(i%rate) / 4
	return ms<<l.TimeShift() | (pair+1)<<(l.WorkerBits+l.SequenceBits) | 1<<l.SequenceBits | seq
}

// The slot tables stay within the stated bound at every point of a stream
// that expires buckets and evicts past the cap.
func TestDupWindowMemoryBound(t *testing.T) {
	l := idgen.DefaultLayout()
	const maxEntries, rate, n = 200_000, 40, 1_000_000 // 25 s of number time
	w := newDupWindow(l, 10*time.Second, maxEntries)
	start := testNow.UnixMilli()
	perBucket := 16*4 + 100
	for i := range n {
		w.add(stream(l, start, rate, i), 1<<62)
		if i%10_000 != 0 {
			continue
		}
		if w.entries > maxEntries {
			t.Fatalf("%d entries, cap %d", w.entries, maxEntries)
		}
		if got, bound := w.tableBytes(), int(float64(w.entries)*dupBytesPerEntry)+perBucket*int(w.n); got > bound {
			t.Fatalf("after %d numbers: %d bytes of tables for %d entries, bound %d", i, got, w.entries, bound)
		}
	}
	// 10 s at 40/ms is 400k numbers: twice the cap, so buckets were evicted.
	if w.evictions == 0 || w.effectiveMs() >= 10_000 {
		t.Fatalf("no eviction (%d) or full window (%dms) with the cap at half the window", w.evictions, w.effectiveMs())
	}
	t.Logf("%d entries in %d bytes of tables: %.2f bytes/entry; %d evictions, window effectively %dms",
		w.entries, w.tableBytes(), float64(w.tableBytes())/float64(w.entries), w.evictions, w.effectiveMs())
}

// BenchmarkDupWindowMemory measures what the dup window costs in live heap
// (after GC, so garbage does not count) with the defaults: a 10-minute
// window and a cap of 10M numbers.
//
//   - fill: 10M numbers within one window, at 20 and at 25 per ms: the bytes
//     an entry costs at the cap. 20 per ms fills a bucket's table to 5/8,
//     25 per ms to just over 3/8 (just after it doubled): about the best
//     and the worst case.
//   - stream: 20M numbers at 20 per ms, 1,000 s of number time: buckets
//     expire, and the 12M numbers a window would hold pass the cap, so the
//     oldest buckets are evicted. The peak live heap must stay within the
//     stated bound at the cap.
//
// Run: go test -run '^$' -bench DupWindowMemory -benchtime 1x ./pipeline/
func BenchmarkDupWindowMemory(b *testing.B) {
	for _, c := range []struct {
		name    string
		n, rate int
	}{{"fill-20perms", 10_000_000, 20}, {"fill-25perms", 10_000_000, 25}, {"stream-20perms", 20_000_000, 20}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			l := idgen.DefaultLayout()
			var ms runtime.MemStats
			for b.Loop() {
				runtime.GC()
				runtime.ReadMemStats(&ms)
				base := ms.HeapAlloc
				w := newDupWindow(l, DefaultDupWindow, DefaultDupMaxEntries)
				start := testNow.UnixMilli()
				var peak uint64
				var peakEntries int
				var took time.Duration
				for i := 0; i < c.n; i += 1_000_000 {
					t0 := time.Now()
					for j := i; j < min(i+1_000_000, c.n); j++ {
						w.add(stream(l, start, c.rate, j), 1<<62)
					}
					took += time.Since(t0)
					runtime.GC()
					runtime.ReadMemStats(&ms)
					if live := ms.HeapAlloc - base; live > peak {
						peak, peakEntries = live, w.entries
					}
				}
				runtime.ReadMemStats(&ms)
				live := ms.HeapAlloc - base
				if w.entries > DefaultDupMaxEntries {
					b.Fatalf("%d entries, cap %d", w.entries, DefaultDupMaxEntries)
				}
				bound := dupBytesPerEntry*DefaultDupMaxEntries + float64(w.n)*(16*4+100)
				if float64(peak) > bound {
					b.Fatalf("peak live heap %d bytes with %d entries, bound %.0f", peak, peakEntries, bound)
				}
				b.ReportMetric(float64(live)/float64(w.entries), "B/entry")
				b.ReportMetric(float64(peak)/(1<<20), "peak-MiB")
				b.ReportMetric(float64(peak)/float64(peakEntries), "peak-B/entry")
				b.ReportMetric(float64(w.evictions), "evictions")
				b.ReportMetric(float64(took.Nanoseconds())/float64(c.n), "ns/number")
				runtime.KeepAlive(w)
			}
		})
	}
}

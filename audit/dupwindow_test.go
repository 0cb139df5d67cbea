package audit

import (
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/flakestream/flakestream/codec"
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

func TestDupWindowShape(t *testing.T) {
	l30, err := idgen.NewLayout(idgen.DefaultEpoch, 30, 10, 10, 13)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		l       idgen.Layout
		window  time.Duration
		compact bool
		spanMs  int64
	}{
		{"default layout, 10m", idgen.DefaultLayout(), 10 * time.Minute, true, 1024},
		{"default layout, 1s", idgen.DefaultLayout(), time.Second, true, 8},
		{"default layout, 7 days", idgen.DefaultLayout(), 7 * 24 * time.Hour, false, 8 << 20},
		{"33 low bits", l30, 10 * time.Minute, false, 8192},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := newDupWindow(c.l, c.window, 100)
			if w.compact != c.compact || w.spanMs() != c.spanMs {
				t.Fatalf("compact %v span %dms, want %v %dms", w.compact, w.spanMs(), c.compact, c.spanMs)
			}
			if cover := (w.n - 1) * w.spanMs(); cover < c.window.Milliseconds() || cover > c.window.Milliseconds()*102/100+w.spanMs() {
				t.Fatalf("%d buckets of %dms cover %dms, want the window %s", w.n, w.spanMs(), cover, c.window)
			}
			// Every kind of number round-trips: first and last of a bucket.
			b := (c.l.EpochMs() + 123456) >> w.shift
			first, last := b<<w.shift<<w.timeShift, (b+1)<<w.shift<<w.timeShift-1
			for _, id := range []int64{first, last, first + 1} {
				if w.contains(id) || !w.add(id, 1<<62) || !w.contains(id) || w.add(id, 1<<62) {
					t.Fatalf("number %d: add/contains disagree", id)
				}
			}
		})
	}
}

// A number leaves the window when the newest number is a window ahead of
// it, in number time; a number from far ahead does not move the window.
func TestDupWindowExpiry(t *testing.T) {
	l := idgen.DefaultLayout()
	w := newDupWindow(l, time.Minute, 1000)
	limit := w.bucketOf(mustCompose(t, l, testNow.Add(5*time.Second), 0, 0, 0))
	old := mustCompose(t, l, testNow.Add(-time.Minute), 1, 1, 0)
	w.add(old, limit)
	w.add(mustCompose(t, l, testNow.Add(-30*time.Second), 1, 1, 0), limit)
	if w.add(mustCompose(t, l, testNow.Add(time.Hour), 1, 1, 0), limit) || w.watermark > limit {
		t.Fatalf("a number an hour ahead was remembered or moved the watermark")
	}
	if !w.contains(old) {
		t.Fatal("the oldest number was forgotten within the window")
	}
	w.add(mustCompose(t, l, testNow.Add(2*time.Second), 1, 1, 0), limit)
	if w.contains(old) || w.entries != 2 {
		t.Fatalf("a window later: old still there %v, entries %d (want 2)", w.contains(old), w.entries)
	}
	if w.add(old, limit) {
		t.Fatal("a number older than the window was remembered")
	}
}

// Past maxEntries the oldest bucket goes, the eviction is counted, the
// window is effectively shorter, and numbers from before it are no longer
// remembered.
func TestDupWindowEviction(t *testing.T) {
	l := idgen.DefaultLayout()
	w := newDupWindow(l, 10*time.Minute, 100)
	limit := int64(1 << 62)
	var firsts []int64
	for s := range 5 {
		for i := range int64(30) {
			id := mustCompose(t, l, testNow.Add(time.Duration(s)*2*time.Second), 1, 1, i)
			if i == 0 {
				firsts = append(firsts, id)
			}
			w.add(id, limit)
			if w.entries > 100 {
				t.Fatalf("%d entries, cap 100", w.entries)
			}
		}
	}
	if w.evictions != 2 || w.contains(firsts[0]) || w.contains(firsts[1]) || !w.contains(firsts[2]) {
		t.Fatalf("evictions %d; first bucket kept %v, second %v, third %v", w.evictions,
			w.contains(firsts[0]), w.contains(firsts[1]), w.contains(firsts[2]))
	}
	if w.add(firsts[0], limit) {
		t.Fatal("a number from an evicted bucket was remembered again")
	}
	if eff := w.effectiveMs(); eff >= 10*time.Minute.Milliseconds() || eff < 4096 {
		t.Fatalf("effective window %dms after evictions", eff)
	}
	// One bucket alone over the cap keeps filling, dropping itself.
	w2 := newDupWindow(l, time.Minute, 10)
	for i := range int64(25) {
		w2.add(mustCompose(t, l, testNow, 1, 1, i), limit)
	}
	if w2.entries > 10 || w2.evictions != 2 {
		t.Fatalf("one full bucket: entries %d evictions %d", w2.entries, w2.evictions)
	}
}

// idSet behaves as a set, zero included.
func TestIDSet(t *testing.T) {
	var s32 idSet[uint32]
	var s64 idSet[uint64]
	ref := map[uint64]bool{}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		k := rng.Uint64N(5000)
		if k%97 == 0 {
			k = 0
		}
		if a, b := s32.add(uint32(k)), s64.add(k); a != !ref[k] || b != !ref[k] {
			t.Fatalf("add(%d) = %v %v with the key present: %v", k, a, b, ref[k])
		}
		ref[k] = true
	}
	for k := range uint64(6000) {
		if s32.has(uint32(k)) != ref[k] || s64.has(k) != ref[k] {
			t.Fatalf("has(%d) wrong", k)
		}
	}
	if s32.n != len(ref) || s64.n != len(ref) {
		t.Fatalf("n %d %d, want %d", s32.n, s64.n, len(ref))
	}
	if load := float64(s64.n) / float64(len(s64.slots)); load > 0.75 || load < 0.375 {
		t.Fatalf("load %.2f outside 3/8..3/4", load)
	}
}

// BenchmarkOrderWindowMemory measures what the order window (renumbered)
// costs in live heap after GC, per entry: n orders by source
// ("orders/<p>/<offset>", 16 partitions) with the defaults (a 10-minute
// window, the cap at 10M), at 20 numbers per ms.
//
//   - fill-1M, fill-10M: 1M and 10M orders within one window, the second
//     at the cap;
//   - stream-20M: 20M orders over 1,000 s of number time: buckets expire,
//     and past the cap the oldest are evicted; the peak is what counts.
//
// Run: go test -run '^$' -bench OrderWindowMemory -benchtime 1x ./audit/
func BenchmarkOrderWindowMemory(b *testing.B) {
	for _, c := range []struct {
		name string
		n    int
	}{{"fill-1M", 1_000_000}, {"fill-10M", 10_000_000}, {"stream-20M", 20_000_000}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			l := idgen.DefaultLayout()
			var ms runtime.MemStats
			src := make([]byte, 0, 64)
			for b.Loop() {
				runtime.GC()
				runtime.ReadMemStats(&ms)
				base := ms.HeapAlloc
				w := newOrderWindow(l, DefaultDupWindow, DefaultDupMaxEntries)
				start := testNow.UnixMilli()
				var peak uint64
				var peakEntries int
				var took time.Duration
				for i := 0; i < c.n; i += 1_000_000 {
					t0 := time.Now()
					for j := i; j < min(i+1_000_000, c.n); j++ {
						src = codec.AppendSource(src[:0], "orders", int32(j%16), int64(j/16))
						id := stream(l, start, 20, j)
						w.add(w.sourceName(string(src)), orderEntry{id: id, offset: int64(j), part: w.part(partKey{"out", int32(j % 16)})}, 1<<62)
					}
					took += time.Since(t0)
					runtime.GC()
					runtime.ReadMemStats(&ms)
					if live := ms.HeapAlloc - base; live > peak {
						peak, peakEntries = live, w.entries
					}
				}
				if w.entries > DefaultDupMaxEntries {
					b.Fatalf("%d entries, cap %d", w.entries, DefaultDupMaxEntries)
				}
				runtime.ReadMemStats(&ms)
				b.ReportMetric(float64(ms.HeapAlloc-base)/float64(w.entries), "B/entry")
				b.ReportMetric(float64(peak)/(1<<20), "peak-MiB")
				b.ReportMetric(float64(peak)/float64(peakEntries), "peak-B/entry")
				b.ReportMetric(float64(w.evictions), "evictions")
				b.ReportMetric(float64(took.Nanoseconds())/float64(c.n), "ns/order")
				runtime.KeepAlive(w)
			}
		})
	}
}

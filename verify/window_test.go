package verify

import (
	"strings"
	"testing"
	"time"
)

// msNumbers makes a number its own time in ms, so that tests pick the
// number time directly.
func msNumbers(n int64) int64 { return n }

// feed is a run fed to a Ledger and a Window alike.
type feed interface {
	Output(src, at Coord, n int64)
	DeadLetter(src, at Coord)
}

// stream feeds n orders of partition 0: order i numbered 1000+i, every
// tenth dead-lettered, each copy fed right after its input, except that
// every seventh copy comes before its input.
func stream(t *testing.T, n int64, input func(Coord, bool), f feed) {
	t.Helper()
	for off := int64(0); off < n; off++ {
		c := in(0, off)
		cp := func() {
			if off%10 == 9 {
				f.DeadLetter(c, dlq(0, off))
			} else {
				f.Output(c, out(0, off), 1000+off)
			}
		}
		if off%7 == 3 {
			cp()
			input(c, false)
			continue
		}
		input(c, false)
		cp()
	}
}

// A Window counts a run as the Ledger over the same records does, and
// holds only what is not settled.
func TestWindowCountsAsTheLedger(t *testing.T) {
	const n = 20000
	l := NewLedger([]Range{{"orders", 0, 0, n}})
	stream(t, n, l.Input, l)
	w := NewWindow("orders", 1, time.Hour, msNumbers)
	stream(t, n, func(c Coord, hasNumber bool) {
		if err := w.Input(c, hasNumber); err != nil {
			t.Fatal(err)
		}
	}, w)
	_, most := w.Held()
	got, want := w.Report(), l.Report()
	if got.Counts != want.Counts || !got.Exact || got.UncheckedNumbers != 0 {
		t.Fatalf("window %v\nledger %v", got.Report, want)
	}
	if most.InFlight > 4096+64 {
		t.Fatalf("held %d offsets in flight at most, for a run that settles as it goes", most.InFlight)
	}
}

func TestWindowFaults(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault func(t *testing.T, w *Window)
		want  func(r WindowReport) bool
	}{
		{"an order with no copy is lost", func(t *testing.T, w *Window) { mustInput(t, w, in(0, 10)) },
			func(r WindowReport) bool { return r.Lost == 1 && len(r.Faults.Lost) == 1 }},
		{"a copy of a settled order is duplicated", func(t *testing.T, w *Window) { w.Output(in(0, 3), out(0, 50), 1003) },
			func(r WindowReport) bool { return r.Duplicated == 1 && len(r.Faults.Duplicated) == 1 }},
		{"a copy with another number, before it settles, is renumbered", func(t *testing.T, w *Window) {
			w.Output(in(0, 10), out(0, 50), 1010)
			w.Output(in(0, 10), out(0, 51), 1011)
			mustInput(t, w, in(0, 10))
		}, func(r WindowReport) bool { return r.Renumbered == 1 && r.Duplicated == 1 }},
		{"a number on two orders", func(t *testing.T, w *Window) {
			mustInput(t, w, in(0, 10))
			w.Output(in(0, 10), out(0, 50), 1005)
		}, func(r WindowReport) bool { return r.DuplicateNumbers == 1 && len(r.Faults.DuplicateNumbers) == 1 }},
		{"a copy whose input never came is unattributed", func(t *testing.T, w *Window) { w.Output(in(0, 12), out(0, 50), 1012) },
			func(r WindowReport) bool { return r.Unattributed == 1 && r.Lost == 0 }},
		{"a copy far past the inputs is unattributed", func(t *testing.T, w *Window) { w.Output(in(0, 1<<40), out(0, 50), 1012) },
			func(r WindowReport) bool { return r.Unattributed == 1 }},
		{"a copy of a partition the topic lacks is unattributed", func(t *testing.T, w *Window) { w.Output(in(5, 1), out(0, 50), 1012) },
			func(r WindowReport) bool { return r.Unattributed == 1 }},
		{"a number older than the window is unchecked, not passed", func(t *testing.T, w *Window) {
			mustInput(t, w, in(0, 10))
			w.Output(in(0, 10), out(0, 50), 1000+int64(time.Hour/time.Millisecond))
			mustInput(t, w, in(0, 11))
			w.Output(in(0, 11), out(0, 51), 1011)
		}, func(r WindowReport) bool { return r.UncheckedNumbers == 1 && r.DuplicateNumbers == 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := NewWindow("orders", 1, time.Minute, msNumbers)
			for off := int64(0); off < 10; off++ {
				mustInput(t, w, in(0, off))
				w.Output(in(0, off), out(0, off), 1000+off)
			}
			tc.fault(t, w)
			r := w.Report()
			if !tc.want(r) || r.Exact {
				t.Fatalf("%v unchecked=%d\n%+v", r.Report, r.UncheckedNumbers, r.Faults)
			}
		})
	}
}

func mustInput(t *testing.T, w *Window, c Coord) {
	t.Helper()
	if err := w.Input(c, false); err != nil {
		t.Fatal(err)
	}
}

// Inputs fed out of offset order are an error, not a silent miscount.
func TestWindowInputsInOrder(t *testing.T) {
	w := NewWindow("orders", 1, 0, msNumbers)
	mustInput(t, w, in(0, 5))
	err := w.Input(in(0, 4), false)
	if err == nil || !strings.Contains(err.Error(), "offset order") {
		t.Fatalf("err %v, want one about the order", err)
	}
	if err := w.Input(in(3, 0), false); err == nil {
		t.Fatal("an input of a partition outside the window was taken")
	}
}

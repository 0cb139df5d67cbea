package verify

import (
	"strings"
	"testing"
)

func in(p int32, off int64) Coord  { return Coord{"orders", p, off} }
func out(p int32, off int64) Coord { return Coord{"orders.numbered", p, off} }
func dlq(p int32, off int64) Coord { return Coord{"orders.dlq", p, off} }

// clean feeds a ledger of two partitions of ten offsets each: offsets
// 0-7 are orders numbered 1000*p+off, 8 a passthrough and 9 a marker.
func clean(t *testing.T) *Ledger {
	t.Helper()
	l := NewLedger([]Range{{"orders", 0, 0, 10}, {"orders", 1, 0, 10}})
	for p := int32(0); p < 2; p++ {
		for off := int64(0); off < 9; off++ {
			l.Input(in(p, off), off == 8)
			l.Output(in(p, off), out(p, off), 1000*int64(p+1)+off)
		}
		l.Marker(in(p, 9))
	}
	return l
}

func TestLedgerCleanIsExact(t *testing.T) {
	r := clean(t).Report()
	want := Counts{Input: 18, Numbered: 16, Passthrough: 2, Exact: true}
	if r.Counts != want {
		t.Fatalf("counts %+v, want %+v", r.Counts, want)
	}
}

func TestLedgerFaults(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault func(l *Ledger)
		want  func(c Counts) bool
		kind  func(f Faults) []Fault
	}{
		{"an input beyond the range is ignored", func(l *Ledger) { l.Input(in(0, 20), false) },
			func(c Counts) bool { return c.Lost == 0 && c.Exact }, nil},
		{"a copy with the same number", func(l *Ledger) { l.Output(in(0, 3), out(0, 50), 1003) },
			func(c Counts) bool {
				return c.Duplicated == 1 && c.Renumbered == 0 && c.DuplicateNumbers == 0 && !c.Exact
			},
			func(f Faults) []Fault { return f.Duplicated }},
		{"a copy with another number", func(l *Ledger) { l.Output(in(0, 3), out(0, 50), 777) },
			func(c Counts) bool {
				return c.Duplicated == 1 && c.Renumbered == 1 && c.DuplicateNumbers == 0 && c.Numbered == 16 && !c.Exact
			},
			func(f Faults) []Fault { return f.Renumbered }},
		{"a third copy with yet another number", func(l *Ledger) {
			l.Output(in(0, 3), out(0, 50), 777)
			l.Output(in(0, 3), out(1, 51), 778)
		},
			func(c Counts) bool { return c.Duplicated == 2 && c.Renumbered == 1 },
			func(f Faults) []Fault { return f.Renumbered }},
		{"an order with no copy", func(l *Ledger) { l.Input(in(1, 9), false) },
			func(c Counts) bool { return c.Lost == 1 && !c.Exact }, func(f Faults) []Fault { return f.Lost }},
		{"a renumbered copy takes another source's number", func(l *Ledger) { l.Output(in(0, 3), out(0, 50), 2004) },
			func(c Counts) bool { return c.Renumbered == 1 && c.DuplicateNumbers == 1 },
			func(f Faults) []Fault { return f.DuplicateNumbers }},
		{"dead-lettered and numbered", func(l *Ledger) { l.DeadLetter(in(1, 2), dlq(1, 0)) },
			func(c Counts) bool { return c.Duplicated == 1 && c.DeadLettered == 0 && !c.Exact },
			func(f Faults) []Fault { return f.Duplicated }},
		{"a copy of a marker", func(l *Ledger) { l.Output(in(1, 9), out(1, 60), 5000) },
			func(c Counts) bool { return c.Unattributed == 1 && !c.Exact },
			func(f Faults) []Fault { return f.Unattributed }},
		{"no source header", func(l *Ledger) { l.Unattributed(out(0, 70), "no header") },
			func(c Counts) bool { return c.Unattributed == 1 && !c.Exact },
			func(f Faults) []Fault { return f.Unattributed }},
		{"a bad number", func(l *Ledger) { l.Invalid(in(0, 1), out(0, 71), "header \"x\"") },
			func(c Counts) bool { return c.InvalidNumbers == 1 && !c.Exact },
			func(f Faults) []Fault { return f.InvalidNumbers }},
		{"a source outside the range", func(l *Ledger) {
			l.Output(in(0, 99), out(0, 72), 9999)
			l.Output(Coord{"other", 0, 1}, out(0, 73), 9998)
		},
			func(c Counts) bool { return c.OutsideRange == 2 && c.Exact }, nil},
		{"not checkable", func(l *Ledger) { l.NotCheckable(5) },
			func(c Counts) bool { return c.NotCheckable == 5 && c.Exact }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := clean(t)
			tc.fault(l)
			r := l.Report()
			if !tc.want(r.Counts) {
				t.Fatalf("counts %+v", r.Counts)
			}
			if tc.kind != nil && len(tc.kind(r.Faults)) != 1 {
				t.Fatalf("want one example of the fault, have %+v", r.Faults)
			}
		})
	}
}

func TestLedgerLostAndDeadLettered(t *testing.T) {
	l := NewLedger([]Range{{"orders", 0, 100, 104}})
	for off := int64(100); off < 104; off++ {
		l.Input(in(0, off), false)
	}
	l.Output(in(0, 100), out(0, 0), 1)
	l.DeadLetter(in(0, 101), dlq(0, 0))
	l.Output(in(0, 103), out(0, 1), 2)
	r := l.Report()
	if r.Lost != 1 || r.DeadLettered != 1 || r.Numbered != 2 || r.Exact {
		t.Fatalf("counts %+v", r.Counts)
	}
	if len(r.Faults.Lost) != 1 || r.Faults.Lost[0].Source != "orders/0/102" {
		t.Fatalf("lost examples %+v, want orders/0/102", r.Faults.Lost)
	}
}

// Numbers passed through from upstream need not increase with the offset:
// the duplicate-number check sorts such a partition instead of merging it
// as it is.
func TestLedgerDuplicateNumbersOutOfOrder(t *testing.T) {
	l := NewLedger([]Range{{"orders", 0, 0, 4}, {"orders", 1, 0, 2}})
	for i, n := range []int64{40, 10, 30, 20} {
		l.Input(in(0, int64(i)), true)
		l.Output(in(0, int64(i)), out(0, int64(i)), n)
	}
	l.Input(in(1, 0), false)
	l.Output(in(1, 0), out(1, 0), 30)
	l.Input(in(1, 1), false)
	l.Output(in(1, 1), out(1, 1), 31)
	r := l.Report()
	if r.DuplicateNumbers != 1 || r.Passthrough != 4 || r.Numbered != 2 {
		t.Fatalf("counts %+v", r.Counts)
	}
	if f := r.Faults.DuplicateNumbers; len(f) != 1 || f[0].Numbers[0] != 30 ||
		!strings.Contains(f[0].Reason, "orders/0/2") || !strings.Contains(f[0].Reason, "orders/1/0") {
		t.Fatalf("examples %+v", f)
	}
}

func TestLedgerOneNumberOnTwoSources(t *testing.T) {
	l := NewLedger([]Range{{"orders", 0, 0, 1}, {"orders", 1, 0, 1}})
	l.Input(in(0, 0), false)
	l.Input(in(1, 0), false)
	l.Output(in(0, 0), out(0, 0), 5)
	l.Output(in(1, 0), out(1, 0), 5)
	r := l.Report()
	if r.DuplicateNumbers != 1 || r.Duplicated != 0 || r.Renumbered != 0 || r.Lost != 0 || r.Exact {
		t.Fatalf("counts %+v", r.Counts)
	}
}

func TestLedgerExamplesAreBounded(t *testing.T) {
	l := NewLedger([]Range{{"orders", 0, 0, 100}})
	for off := int64(0); off < 100; off++ {
		l.Input(in(0, off), false)
	}
	r := l.Report()
	if r.Lost != 100 || len(r.Faults.Lost) != MaxExamples {
		t.Fatalf("lost %d with %d examples, want 100 with %d", r.Lost, len(r.Faults.Lost), MaxExamples)
	}
}

func TestParseOffsets(t *testing.T) {
	b, err := ParseOffsets("0:10, 1:20,orders.b:2:30")
	if err != nil {
		t.Fatal(err)
	}
	if b.Offsets[""][0] != 10 || b.Offsets[""][1] != 20 || b.Offsets["orders.b"][2] != 30 {
		t.Fatalf("parsed %+v", b.Offsets)
	}
	for _, bad := range []string{"", "0", "0:x", "-1:3", "0:1,0:2", "a:b:c"} {
		if _, err := ParseOffsets(bad); err == nil {
			t.Errorf("ParseOffsets(%q): no error", bad)
		}
	}
	if b, err := ParseBound("2026-12-01T00:00:00Z"); err != nil || b.Time.IsZero() {
		t.Errorf("ParseBound(time): %v %v", b, err)
	}
	if b, err := ParseBound("start"); err != nil || !b.IsZero() {
		t.Errorf("ParseBound(start): %v %v", b, err)
	}
	if _, err := ParseBound("yesterday"); err == nil {
		t.Error("ParseBound(yesterday): no error")
	}
}

// FuzzParseBound: ParseBound never panics, and what it accepts names only
// non-negative partitions and offsets.
func FuzzParseBound(f *testing.F) {
	for _, s := range []string{"start", "end", "0:10,1:20", "t:0:1", "2026-12-01T00:00:00Z", "::", "0:-1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, err := ParseBound(s)
		if err != nil {
			return
		}
		for _, m := range b.Offsets {
			for p, o := range m {
				if p < 0 || o < 0 {
					t.Fatalf("ParseBound(%q) gave partition %d offset %d", s, p, o)
				}
			}
		}
	})
}

// A record in neither the output nor the DLQ is pending at or after the
// offset Pending names, lost before it; pending is no fault.
func TestLedgerPending(t *testing.T) {
	for _, c := range []struct {
		from          int64
		lost, pending int64
		exact         bool
	}{{7, 2, 3, false}, {5, 0, 5, true}, {10, 5, 0, false}} {
		l := NewLedger([]Range{{Topic: "in", Partition: 0, From: 0, To: 10}})
		for o := int64(0); o < 10; o++ {
			l.Input(Coord{Topic: "in", Offset: o}, false)
		}
		for o := int64(0); o < 5; o++ {
			l.Output(Coord{Topic: "in", Offset: o}, Coord{Topic: "out", Offset: o}, 1000+o)
		}
		l.Pending("in", 0, c.from)
		rep := l.Report()
		if rep.Lost != c.lost || rep.Pending != c.pending || rep.Exact != c.exact {
			t.Errorf("pending from %d: %s; want lost %d, pending %d, exact %t", c.from, rep, c.lost, c.pending, c.exact)
		}
	}
}

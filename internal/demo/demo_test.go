package demo

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/flakestream/flakestream/audit"
	"github.com/flakestream/flakestream/idgen"
	"github.com/flakestream/flakestream/verify"
)

// Duplicates counts copies beyond an order's first and numbers given to
// two orders; the unique numbers leave the second out.
func TestSummaryDuplicates(t *testing.T) {
	for _, c := range []struct {
		name       string
		counts     verify.Counts
		dups, uniq int
	}{
		{"clean", verify.Counts{Input: 10, Numbered: 8, Passthrough: 2}, 0, 10},
		{"a second copy", verify.Counts{Input: 10, Numbered: 8, Passthrough: 2, Duplicated: 1}, 1, 10},
		{"a number on two orders", verify.Counts{Input: 10, Numbered: 8, Passthrough: 2, DuplicateNumbers: 1}, 1, 9},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newSummary(verify.Report{Counts: c.counts}, 10, time.Second, idgen.DefaultLayout(), nil, nil, auditSummary{})
			if s.Duplicates != c.dups || s.UniqueNumbers != c.uniq {
				t.Fatalf("duplicates %d, unique %d; want %d, %d", s.Duplicates, s.UniqueNumbers, c.dups, c.uniq)
			}
		})
	}
}

// Exact needs the accounting's Exact, no copy from outside the demo's
// input, and every number checked.
func TestSummaryExact(t *testing.T) {
	exact := verify.Counts{Input: 1, Numbered: 1, Exact: true}
	outside := exact
	outside.OutsideRange = 1
	for _, c := range []struct {
		name      string
		counts    verify.Counts
		unchecked int64
		want      bool
	}{
		{"exact", exact, 0, true},
		{"not exact", verify.Counts{Input: 1, Lost: 1}, 0, false},
		{"a copy from outside the input", outside, 0, false},
		{"a number unchecked", exact, 1, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newSummary(verify.Report{Counts: c.counts}, 1, time.Second, idgen.DefaultLayout(), nil, nil, auditSummary{})
			s.UncheckedNumbers = c.unchecked
			if s.Exact() != c.want {
				t.Fatalf("Exact() %t, want %t: %s", s.Exact(), c.want, s.Accounting())
			}
		})
	}
}

// The one-shot demo on its embedded stack: every order accounted for,
// exactly once, every numbered record audited, nothing flagged.
func TestRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := Run(ctx, 3000, 2, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !s.OK() || s.In != 3000 || s.Duplicates != 0 || s.Lost != 0 || s.DLQ == 0 || s.Passthrough == 0 {
		t.Fatalf("not a clean exactly-once run: %+v\n%s", s.Counts, s.Accounting())
	}
	if s.Audited != s.Numbered+s.Passthrough || len(s.Anomalies) != len(audit.AnomalyKinds()) {
		t.Fatalf("audited %d of %d+%d, anomalies %v", s.Audited, s.Numbered, s.Passthrough, s.Anomalies)
	}
}

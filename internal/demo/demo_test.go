package demo

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/flakestream/flakestream/audit"
	"github.com/flakestream/flakestream/idgen"
	"github.com/flakestream/flakestream/test/accounting"
)

// Duplicates is the output records beyond one per distinct number, for
// both accountings: Check counts every output copy in Numbered, Stream
// counts extra copies in Duplicated only.
func TestSummaryDuplicates(t *testing.T) {
	for _, c := range []struct {
		name    string
		rep     accounting.Report
		outputs int
		want    int
	}{
		{"clean", accounting.Report{In: 10, Numbered: 8, Passthrough: 2, Unique: 10}, 10, 0},
		{"check: a copy counted in Numbered", accounting.Report{In: 10, Numbered: 9, Passthrough: 2, Duplicated: 1, Unique: 10}, 11, 1},
		{"stream: a copy counted in Duplicated", accounting.Report{In: 10, Numbered: 8, Passthrough: 2, Duplicated: 1, Unique: 10}, 11, 1},
		{"a number issued twice", accounting.Report{In: 10, Numbered: 8, Passthrough: 2, Unique: 9, Reissued: 1}, 10, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newSummary(c.rep, c.outputs, c.rep.In, time.Second, idgen.DefaultLayout(), nil, nil, auditSummary{})
			if s.Duplicates != c.want {
				t.Fatalf("duplicates %d, want %d", s.Duplicates, c.want)
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
		t.Fatalf("not a clean exactly-once run: %+v\n%s", s.Counts, s.Report)
	}
	if s.Audited != s.Numbered+s.Passthrough || len(s.Anomalies) != len(audit.AnomalyKinds()) {
		t.Fatalf("audited %d of %d+%d, anomalies %v", s.Audited, s.Numbered, s.Passthrough, s.Anomalies)
	}
}

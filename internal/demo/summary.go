package demo

import (
	"fmt"
	"time"

	"github.com/flakestream/flakestream/idgen"
	"github.com/flakestream/flakestream/verify"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Counts is a demo's outcome in numbers: the CLI's --json output.
type Counts struct {
	In            int     `json:"in"`
	Numbered      int     `json:"numbered"`
	Passthrough   int     `json:"passthrough"`
	DLQ           int     `json:"dlq"`
	UniqueNumbers int     `json:"unique_numbers"`
	Duplicates    int     `json:"duplicates"`
	Lost          int     `json:"lost"`
	RecordsPerSec float64 `json:"records_per_sec"`
	// Audited counts the audit topic's records; Anomalies what the audit
	// flagged, by kind, every kind present.
	Audited   int              `json:"audited"`
	Anomalies map[string]int64 `json:"anomalies"`
}

// Summary is what a demo (Run or Serve) found.
type Summary struct {
	Counts
	// Report is the accounting of every order against the output and the
	// dead letters: verify's, as `flakestream verify` counts.
	Report verify.Report
	// UncheckedNumbers (Serve only) counts numbers too old for the
	// accounting's uniqueness window to check; any makes the run not exact.
	UncheckedNumbers int64
	// Took is how long the worker took to number the orders (Run), or how
	// long the order stream ran (Serve).
	Took time.Duration
	// Layout decodes the Samples' numbers.
	Layout idgen.Layout
	// Samples are up to three numbered records.
	Samples []*kgo.Record
	// DeadLetters counts the dead letters by error class.
	DeadLetters map[string]int
	// AuditTopic is where the audit wrote; AuditSamples up to three of its
	// records (JSON lines).
	AuditTopic   string
	AuditSamples []string

	// Serve only: the most the accounting held at once, its uniqueness
	// window, and what the trimmer deleted from the embedded Kafka.
	Held         verify.WindowHeld
	Window       time.Duration
	Deleted      int64
	TrimFailures int
	LastTrimErr  error
}

// auditSummary is what the audit of a demo found.
type auditSummary struct {
	topic     string
	audited   int
	anomalies map[string]int64
	samples   []string
}

// newSummary is the summary of a demo from its accounting (rep), the n
// orders it numbered in took, and its audit.
func newSummary(rep verify.Report, n int, took time.Duration, l idgen.Layout, dlq map[string]int, samples []*kgo.Record, a auditSummary) *Summary {
	// Duplicates: copies beyond an order's first, and numbers given to
	// more than one order; the unique numbers are the orders' numbers less
	// the numbers given twice.
	dups := rep.Duplicated + rep.DuplicateNumbers
	return &Summary{
		Counts: Counts{
			In: int(rep.Input), Numbered: int(rep.Numbered), Passthrough: int(rep.Passthrough), DLQ: int(rep.DeadLettered),
			UniqueNumbers: int(rep.Numbered + rep.Passthrough - rep.DuplicateNumbers),
			Duplicates:    int(dups),
			Lost:          int(rep.Lost),
			RecordsPerSec: float64(n) / took.Seconds(),
			Audited:       a.audited, Anomalies: a.anomalies,
		},
		Report: rep, Took: took, Layout: l, Samples: samples, DeadLetters: dlq,
		AuditTopic: a.topic, AuditSamples: a.samples,
	}
}

// Exact reports whether every order is in the output or the dead letters
// exactly once, every number unique: the accounting's Exact, with no copy
// naming a source outside the demo's input (which holds every order) and
// no number left unchecked.
func (s *Summary) Exact() bool {
	return s.Report.Exact && s.Report.OutsideRange == 0 && s.UncheckedNumbers == 0
}

// Accounting is the accounting's counts, as one line.
func (s *Summary) Accounting() string {
	if s.UncheckedNumbers > 0 {
		return fmt.Sprintf("%s unchecked_numbers=%d", s.Report, s.UncheckedNumbers)
	}
	return s.Report.String()
}

// OK reports whether the demo was exactly once and its audit flagged
// nothing.
func (s *Summary) OK() bool { return s.Exact() && s.Flagged() == 0 }

// Flagged is the number of anomalies the audit found.
func (s *Summary) Flagged() (n int64) {
	for _, v := range s.Anomalies {
		n += v
	}
	return n
}

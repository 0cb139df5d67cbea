package demo

import (
	"time"

	"github.com/flakestream/flakestream/idgen"
	"github.com/flakestream/flakestream/test/accounting"
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
	// dead letters.
	Report accounting.Report
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
	Held         accounting.Held
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

// newSummary is the summary of a demo from its accounting (rep), the
// number of output records read back, the n orders it numbered in took,
// and its audit.
func newSummary(rep accounting.Report, outputs, n int, took time.Duration, l idgen.Layout, dlq map[string]int, samples []*kgo.Record, a auditSummary) *Summary {
	return &Summary{
		Counts: Counts{
			In: rep.In, Numbered: rep.Numbered, Passthrough: rep.Passthrough, DLQ: rep.DLQ,
			UniqueNumbers: rep.Unique,
			// Every output record beyond one per distinct number: the one
			// formula, whichever accounting (Check or Stream) counted.
			Duplicates:    outputs - rep.Unique,
			Lost:          rep.Lost,
			RecordsPerSec: float64(n) / took.Seconds(),
			Audited:       a.audited, Anomalies: a.anomalies,
		},
		Report: rep, Took: took, Layout: l, Samples: samples, DeadLetters: dlq,
		AuditTopic: a.topic, AuditSamples: a.samples,
	}
}

// OK reports whether the demo was exactly once and its audit flagged
// nothing.
func (s *Summary) OK() bool { return s.Report.OK() && s.Flagged() == 0 }

// Flagged is the number of anomalies the audit found.
func (s *Summary) Flagged() (n int64) {
	for _, v := range s.Anomalies {
		n += v
	}
	return n
}

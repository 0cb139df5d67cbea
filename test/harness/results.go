package harness

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flakestream/flakestream/test/accounting"
)

// Result is one run of a fault test: the accounting, the cost of the
// faults, and how to run it again. Record writes it as a log line and as a
// JSON line of $FLAKESTREAM_ARTIFACTS/faults.jsonl.
type Result struct {
	Fault   string `json:"fault"`   // the row of the results table
	Test    string `json:"test"`    // the Go test that ran it
	Kafka   string `json:"kafka"`   // kfake, external (KAFKA_BROKERS) or local (scripts/kafka-local)
	Command string `json:"command"` // the command that reproduces it
	Setup   string `json:"setup"`   // workers, flags, stream

	Records         int `json:"records"`
	Numbered        int `json:"numbered"`
	Passthrough     int `json:"passthrough"`
	DLQ             int `json:"dlq"`
	Lost            int `json:"lost"`
	Duplicated      int `json:"duplicated"`
	Renumbered      int `json:"renumbered"`
	Reissued        int `json:"reissued"`
	OrderViolations int `json:"order_violations"`
	Mismatched      int `json:"mismatched"`
	Unattributed    int `json:"unattributed"`

	LongestStallS float64        `json:"longest_stall_s"`
	StallAtS      float64        `json:"stall_at_s"`   // when the longest stall began, seconds into the run
	RecoverS      float64        `json:"recover_s"`    // the slowest recovery of the run's faults
	Faults        []FaultTiming  `json:"faults"`       // each fault
	DurationS     float64        `json:"duration_s"`   // first order written to output complete
	WorkerExits   int            `json:"worker_exits"` // workers that exited by themselves
	Extra         map[string]any `json:"extra,omitempty"`
	OK            bool           `json:"ok"`
	Date          string         `json:"date"`

	// PartitionStallS is the longest stall of any one input partition
	// (Monitor.PartitionStall): longer than LongestStallS when a fault
	// stops some partitions while others move.
	PartitionStallS float64 `json:"partition_stall_s"`
}

// SetReport copies the accounting from rep.
func (r *Result) SetReport(rep accounting.Report) {
	r.Records, r.Numbered, r.Passthrough, r.DLQ = rep.In, rep.Numbered, rep.Passthrough, rep.DLQ
	r.Lost, r.Duplicated, r.Renumbered, r.Reissued = rep.Lost, rep.Duplicated, rep.Renumbered, rep.Reissued
	r.OrderViolations, r.Mismatched, r.Unattributed = rep.OrderViolations, rep.Mismatched, rep.Unattributed
	r.OK = rep.OK()
}

// SetTimeline copies the longest stall and the faults' costs from m.
func (r *Result) SetTimeline(m *Monitor, start time.Time) {
	st, faults := m.Timeline()
	r.LongestStallS = round(st.Length.Seconds())
	if !st.From.IsZero() {
		r.StallAtS = round(st.From.Sub(start).Seconds())
	}
	r.Faults = faults
	ps, _ := m.PartitionStall()
	r.PartitionStallS = round(ps.Seconds())
	r.RecoverS = 0
	for i := range r.Faults {
		f := &r.Faults[i]
		f.AtS, f.DurationS, f.StallS, f.RecoverS = round(f.AtS), round(f.DurationS), round(f.StallS), round(f.RecoverS)
		if f.RecoverS < 0 {
			r.RecoverS = -1
		} else if r.RecoverS >= 0 {
			r.RecoverS = max(r.RecoverS, f.RecoverS)
		}
	}
}

func round(x float64) float64 {
	if x < 0 {
		return x
	}
	return float64(int64(x*100+0.5)) / 100
}

var resultsMu sync.Mutex

// Record logs r as one structured line (and, with -v, its faults) and, if
// FLAKESTREAM_ARTIFACTS is set, appends it to faults.jsonl there.
func Record(t testing.TB, r Result) {
	t.Helper()
	r.Test = t.Name()
	r.Date = time.Now().UTC().Format(time.RFC3339)
	var b strings.Builder
	slog.New(slog.NewTextHandler(&b, nil)).Info("fault result",
		"fault", r.Fault, "kafka", r.Kafka, "records", r.Records, "lost", r.Lost, "duplicated", r.Duplicated,
		"reissued", r.Reissued, "dlq", r.DLQ, "order_violations", r.OrderViolations, "mismatched", r.Mismatched,
		"longest_stall_s", r.LongestStallS, "partition_stall_s", r.PartitionStallS, "recover_s", r.RecoverS, "duration_s", r.DurationS,
		"worker_exits", r.WorkerExits, "ok", r.OK)
	t.Log(strings.TrimSpace(b.String()))
	for _, f := range r.Faults {
		t.Logf("  fault %-28s at %6.2fs lasted %5.2fs: stall %5.2fs, recovered %5.2fs after it ended (%d committed before)",
			f.Name, f.AtS, f.DurationS, f.StallS, f.RecoverS, f.CommittedAt)
	}
	dir := os.Getenv("FLAKESTREAM_ARTIFACTS")
	if dir == "" {
		return
	}
	line, err := json.Marshal(r)
	if err != nil {
		t.Errorf("test/faults: result: %v", err)
		return
	}
	resultsMu.Lock()
	defer resultsMu.Unlock()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Errorf("test/faults: %v", err)
		return
	}
	f, err := os.OpenFile(filepath.Join(dir, "faults.jsonl"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Errorf("test/faults: %v", err)
		return
	}
	defer f.Close()
	if _, err := fmt.Fprintf(f, "%s\n", line); err != nil {
		t.Errorf("test/faults: write faults.jsonl: %v", err)
	}
}

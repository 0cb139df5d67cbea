package audit

import (
	"testing"
	"time"

	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/idgen"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// The live page counts records with anomalies apart from the flags: a
// record with two anomalies is one record and two flags, on the page and
// in the metrics.
func TestLiveCountsRecordsApartFromFlags(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newAuditMetrics(reg, idgen.DefaultLayout())
	s := newLiveState(&cfg{recent: 10, layout: idgen.DefaultLayout()}, m)
	b := &auditBatch{
		recs:   make([]codec.AuditRecord, 4),
		sets:   []anomalies{anDuplicate | anRenumbered, anDuplicate, 0, anBackwards},
		values: [][]byte{[]byte(`{}`), []byte(`{}`), []byte(`{}`), []byte(`{}`)},
	}
	s.add(b, time.Now())
	sum := s.summary(time.Now(), nil)
	var flags int64
	for _, n := range sum.Anomalies {
		flags += n
	}
	if sum.FlaggedRecs != 3 || flags != 4 || sum.Anomalies["duplicate"] != 2 {
		t.Fatalf("flagged_records %d, flags %d (%v): want 3 records and 4 flags, 2 of them duplicate", sum.FlaggedRecs, flags, sum.Anomalies)
	}
	var got dto.Metric
	if err := m.flagged.Write(&got); err != nil || got.GetCounter().GetValue() != 3 {
		t.Fatalf("flakestream_audit_flagged_records_total = %v (%v), want 3", got.GetCounter().GetValue(), err)
	}
}

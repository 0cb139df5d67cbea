package pipeline

import (
	"testing"
	"time"

	"github.com/flakestream/flakestream/eos"
	"github.com/flakestream/flakestream/internal/orders"
	"github.com/flakestream/flakestream/test/pipetest"
	"github.com/prometheus/client_golang/prometheus"
)

// The numbers given to records and the numbers reserved are two counters:
// every number given is reserved first, the records numbered and committed
// were given one each (and only they, without an aborted transaction), and
// the deprecated flakestream_numbers_issued_total is the reserved count
// under its old name.
func TestNumbersAssignedAndReserved(t *testing.T) {
	e := pipetest.NewEnv(t, 2)
	e.Produce(t, 3000, orders.Mix{BadPerMille: 10, NumberedPerMille: 20})
	reg := prometheus.NewRegistry()
	g := e.Generator(t, 1)
	RegisterGenerator(reg, g)
	w, err := NewWorker(eos.Config{Brokers: e.Kafka.Addrs, Topics: []string{e.Input}, Group: e.Group, InstanceID: "m", TransactionTimeout: 5 * time.Second,
		Logger: pipetest.Logger(t), Registerer: reg}, OutputTopic(e.Out), DLQTopic(e.DLQ), Numbers(g), Codec(e.Codec))
	if err != nil {
		t.Fatal(err)
	}
	run := pipetest.Go(t, "worker", w.Run)
	rep := e.WaitOutput(t, 90*time.Second)
	pipetest.RequireExactlyOnce(t, rep)
	run.Stop(t)
	m := gather(t, reg)
	numbered, assigned := m["flakestream_records_numbered_total"], m["flakestream_numbers_assigned_total"]
	reserved, issued := m["flakestream_numbers_reserved_total"], m["flakestream_numbers_issued_total"]
	if numbered != float64(rep.Numbered) {
		t.Fatalf("records_numbered_total %v, want the %d numbered records", numbered, rep.Numbered)
	}
	if assigned < numbered || (m[`flakestream_transactions_total{result="aborted"}`] == 0 && assigned != numbered) {
		t.Fatalf("numbers_assigned_total %v with %v numbered records committed and %v aborted transactions",
			assigned, numbered, m[`flakestream_transactions_total{result="aborted"}`])
	}
	if reserved < assigned || issued != reserved {
		t.Fatalf("numbers_reserved_total %v, numbers_issued_total %v: want reserved >= assigned (%v) and issued = reserved", reserved, issued, assigned)
	}
}

// gather is every counter of reg by name, with its labels in braces when
// it has any.
func gather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if m.GetCounter() == nil {
				continue
			}
			name := mf.GetName()
			if len(m.GetLabel()) > 0 {
				name += "{"
				for i, l := range m.GetLabel() {
					if i > 0 {
						name += ","
					}
					name += l.GetName() + `="` + l.GetValue() + `"`
				}
				name += "}"
			}
			out[name] = m.GetCounter().GetValue()
		}
	}
	return out
}

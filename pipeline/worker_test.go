package pipeline

import (
	"testing"
	"time"

	"github.com/flakestream/flakestream/internal/orders"
	"github.com/flakestream/flakestream/test/pipetest"
)

// Every record is accounted for, byte for byte, with unique numbers, every
// input partition's order kept, and the counts balance.
func TestWorkerEndToEnd(t *testing.T) {
	e := pipetest.NewEnv(t, 4)
	e.Produce(t, 20000, orders.Mix{BadPerMille: 12, NumberedPerMille: 20})
	wk := start(t, e, "a")
	rep := e.WaitOutput(t, 60*time.Second)
	pipetest.RequireExactlyOnce(t, rep)
	wk.stop(t)
	s := wk.w.Stats()
	if s.In != int64(len(e.Inputs)) || s.In != s.Numbered+s.Passthrough+s.DLQ {
		t.Fatalf("stats do not balance: %+v", s)
	}
	if rep.DLQ != 20000*12/1000 || rep.Passthrough != 20000*20/1000 {
		t.Fatalf("dlq %d passthrough %d, want %d and %d", rep.DLQ, rep.Passthrough, 240, 400)
	}
}

package pipeline

import (
	"testing"
	"time"

	"github.com/flakestream/flakestream/internal/orders"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The worker runs the orphaned-transaction guard (internal/txnguard) at the
// start of its session and again before producing after an aborted
// transaction, and not at all with OrphanGuard(false). The guard's own
// behaviour is tested in internal/txnguard; here kfake counts the
// DescribeProducers requests on the output topic.
func TestWorkerRunsOrphanGuard(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(map[bool]string{true: "on", false: "off"}[on], func(t *testing.T) {
			e := newEnv(t, 2)
			fake := e.kafka.Fake()
			if fake == nil {
				t.Skip("counts requests with kfake faults")
			}
			checks := fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.DescribeProducers}, Topic: e.out, Observe: true, Count: -1})
			// One produce to the output fails for good: that transaction
			// aborts and its records are numbered again.
			fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: e.out, Err: kerr.InvalidRecord, Count: 1})
			e.produce(t, 2000, orders.Mix{})
			wk := e.start(t, "a", OrphanGuard(on))
			rep := e.waitOutput(t, 60*time.Second)
			requireExactlyOnce(t, rep)
			wk.stop(t)
			if s := wk.w.Stats(); s.Aborted == 0 {
				t.Fatalf("no transaction aborted: the produce fault did not hit (%+v)", s)
			}
			switch n := checks.Hits(); {
			case on && n < 2:
				t.Fatalf("the guard ran %d times, want at the session start and after the aborted transaction", n)
			case !on && n != 0:
				t.Fatalf("the guard ran %d times with OrphanGuard(false)", n)
			}
		})
	}
}

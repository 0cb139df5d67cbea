package pipeline

import (
	"context"
	"testing"
	"time"

	"github.com/flakestream/flakestream/eos"
	"github.com/flakestream/flakestream/eos/txnguard"
	"github.com/flakestream/flakestream/internal/orders"
	"github.com/flakestream/flakestream/test/pipetest"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The worker runs the orphaned-transaction guard (eos/txnguard, through
// BeforeProduce as the CLI wires it) at the start of its session and again
// before producing after an aborted transaction, and not at all without it.
// The guard's own behaviour is tested in eos/txnguard, the loop's
// timing in eos; here kfake counts the guard's DescribeProducers
// requests on the output topic (one per check: it reports what it ends).
func TestWorkerRunsOrphanGuard(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(map[bool]string{true: "on", false: "off"}[on], func(t *testing.T) {
			e := pipetest.NewEnv(t, 2)
			fake := e.Kafka.Fake()
			if fake == nil {
				t.Skip("counts requests with kfake faults")
			}
			checks := fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.DescribeProducers}, Topic: e.Out, Observe: true, Count: -1})
			// One produce to the output fails for good: that transaction
			// aborts and its records are numbered again.
			fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: e.Out, Err: kerr.InvalidRecord, Count: 1})
			e.Produce(t, 2000, orders.Mix{})
			var opts []Opt
			if on {
				g, err := txnguard.New(pipetest.Logger(t), nil)
				if err != nil {
					t.Fatal(err)
				}
				opts = append(opts, setLoop(func(s *eos.Config) {
					s.BeforeProduce = func(ctx context.Context, cl *kgo.Client, parts map[string][]int32) error {
						_, err := g.Check(ctx, cl, parts)
						return err
					}
				}))
			}
			wk := start(t, e, "a", opts...)
			rep := e.WaitOutput(t, 60*time.Second)
			pipetest.RequireExactlyOnce(t, rep)
			wk.stop(t)
			if s := wk.w.Stats(); s.Aborted == 0 {
				t.Fatalf("no transaction aborted: the produce fault did not hit (%+v)", s)
			}
			switch n := checks.Hits(); {
			case on && n < 2:
				t.Fatalf("the guard ran %d times, want at the session start and after the aborted transaction", n)
			case !on && n != 0:
				t.Fatalf("the guard ran %d times without it", n)
			}
		})
	}
}

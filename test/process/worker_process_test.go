package process_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/flakestream/flakestream/internal/orders"
	"github.com/flakestream/flakestream/test/harness"
	"github.com/flakestream/flakestream/test/testenv"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// newProcessEnv is a Kafka (testenv.Kafka), a Redis and the topics a
// worker process runs on; test/harness holds the helpers, shared with the
// fault suite in test/faults/.
func newProcessEnv(t *testing.T, partitions int32) *harness.Env {
	t.Helper()
	return harness.NewEnv(t, testenv.Kafka(t), testenv.RedisServer(t), partitions)
}

// The worker is killed with SIGKILL in the middle of a transaction (its
// records produced, its commit on the wire), then restarted with the same
// instance ID. The restart fences the dead transaction at once, and the
// output is still exactly once.
func TestWorkerProcessKilledMidTransaction(t *testing.T) {
	e := newProcessEnv(t, 4)
	fake := e.Kafka.Fake()
	if fake == nil {
		t.Skip("needs kfake to catch the commit on the wire; the real-broker fault suite kills at random instead")
	}
	e.Produce(t, 20000, orders.Mix{BadPerMille: 5, NumberedPerMille: 5})
	var victim atomic.Pointer[harness.Process]
	var commits, killed atomic.Int32
	fake.ControlKey(int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		end := req.(*kmsg.EndTxnRequest)
		p := victim.Load()
		if !end.Commit || p == nil || killed.Load() > 0 || commits.Add(1) < 3 {
			return nil, nil, false
		}
		// The third commit of the first process never arrives: the
		// process dies with its transaction open.
		killed.Add(1)
		p.Kill()
		return nil, fmt.Errorf("killed mid-transaction"), true
	})
	first := e.StartWorker(t, "crashy", "--max-poll-records", "1000", "--static-membership")
	victim.Store(first)
	select {
	case <-first.Done:
	case <-time.After(60 * time.Second):
		t.Fatal("the worker was never killed")
	}
	if killed.Load() != 1 {
		t.Fatalf("worker exited without being killed: %v\n%s", first.Err, harness.Tail(first.Stderr.String(), 2000))
	}
	restarted := time.Now()
	second := e.StartWorker(t, "crashy", "--max-poll-records", "1000", "--static-membership")
	rep := e.Check(t, 90*time.Second)
	if !rep.OK() {
		t.Fatalf("after a kill and a restart: %s", rep)
	}
	t.Logf("killed mid-transaction after 2 commits; restart caught up in %s: %s", time.Since(restarted).Round(time.Millisecond), rep)

	// SIGTERM: the worker ends its transaction, leaves the group and exits
	// 0 within the shutdown bound.
	stopAt := time.Now()
	_ = second.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-second.Done:
	case <-time.After(20 * time.Second):
		t.Fatal("the worker did not exit within 20s of SIGTERM")
	}
	if second.Err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", second.Err, harness.Tail(second.Stderr.String(), 2000))
	}
	if !strings.Contains(second.Stderr.String(), "left the group") {
		t.Fatalf("the worker did not say it left the group:\n%s", harness.Tail(second.Stderr.String(), 2000))
	}
	t.Logf("SIGTERM to exit: %s", time.Since(stopAt).Round(time.Millisecond))
}

func TestMain(m *testing.M) { harness.Main(m) }

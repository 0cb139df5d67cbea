package cli

import (
	"testing"

	"github.com/flakestream/flakestream/eos/txnguard"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// --orphan-guard=false gives no hook; on, the hook runs the guard and its
// counter is exported from the first check, before any abort, with a
// series per checked topic.
func TestOrphanGuardHook(t *testing.T) {
	off := consumeConfig{orphanGuard: false}
	if h, err := off.orphanGuardHook(nil, nil); h != nil || err != nil {
		t.Fatalf("off: hook %v, err %v; want none", h != nil, err)
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.TransactionalID("tid"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	reg := prometheus.NewRegistry()
	on := consumeConfig{orphanGuard: true}
	h, err := on.orphanGuardHook(nil, reg)
	if err != nil || h == nil {
		t.Fatalf("on: hook %v, err %v", h != nil, err)
	}
	if err := h(t.Context(), cl, map[string][]int32{"out": {0, 1}}); err != nil {
		t.Fatalf("check with no orphan: %v", err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == txnguard.MetricName && len(mf.GetMetric()) == 1 && mf.GetMetric()[0].GetCounter().GetValue() == 0 {
			return
		}
	}
	t.Fatalf("%s{topic=\"out\"} 0 is not exported after the first check", txnguard.MetricName)
}

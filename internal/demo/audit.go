package demo

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/flakestream/flakestream/audit"
	"github.com/flakestream/flakestream/eos"
	"github.com/flakestream/flakestream/idgen"
	"github.com/flakestream/flakestream/internal/kread"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
)

// auditor is the audit consumer of the demo: in-process, on the numbered
// topic, writing the audit topic exactly once, as `flakestream audit` does.
type auditor struct {
	a    *audit.Auditor
	stop context.CancelFunc
	done chan error
	sum  auditSummary
}

// auditGroup is the group of the demo's audit.
const auditGroup = "flakestream-demo-audit"

// startAudit starts auditing the numbered topic with the defaults of the
// audit command (a 10-minute dup window, 5 s of skew, 5 minutes of lag).
// The demo's numbers come from server 1 (this run) and 2 (an earlier run),
// so those are the allowed servers. reg, if set, receives its metrics.
func startAudit(ctx context.Context, brokers []string, l idgen.Layout, log *slog.Logger, reg prometheus.Registerer) (*auditor, error) {
	d := &auditor{done: make(chan error, 1), sum: auditSummary{topic: auditTopic}}
	a, err := audit.New(eos.Config{Brokers: brokers, Topics: []string{outputTopic}, Group: auditGroup,
		InstanceID: "demo", Logger: log, Registerer: reg},
		audit.Topic(auditTopic), audit.CreateTopic(), audit.Layout(l), audit.AllowedServers(1, 2))
	if err != nil {
		return nil, err
	}
	d.a = a
	actx, stop := context.WithCancel(ctx)
	d.stop = stop
	go func() { d.done <- a.Run(actx) }()
	return d, nil
}

// finish waits until every one of want numbered records is audited, stops
// the auditor, and checks the audit topic: one record for each, read
// read_committed.
func (d *auditor) finish(ctx context.Context, brokers []string, want int) error {
	defer d.stop()
	if err := waitUntil(ctx, d.done, func() bool { return d.a.Stats().Audited >= int64(want) },
		func() string { return fmt.Sprintf("audited %d of %d numbered records", d.a.Stats().Audited, want) }); err != nil {
		return err
	}
	d.stop()
	if err := <-d.done; err != nil {
		return err
	}
	d.sum.anomalies = d.a.Stats().Anomalies
	recs, err := kread.ReadCommitted(ctx, []kgo.Opt{kgo.SeedBrokers(brokers...)}, auditTopic)
	if err != nil {
		return err
	}
	d.sum.audited = len(recs)
	if d.sum.audited != want {
		return fmt.Errorf("%d audit records for %d numbered records: not exactly once", d.sum.audited, want)
	}
	// A sample of each kind: the first record (numbered by the earlier
	// run, it passed through), and two numbered by this one.
	for i := 0; i < len(recs) && len(d.sum.samples) < 3; i += len(recs)/3 + 1 {
		d.sum.samples = append(d.sum.samples, string(recs[i].Value))
	}
	return nil
}

func (d *auditor) summary() auditSummary { return d.sum }

// waitUntil polls done until it holds, failing if the part whose exit
// is died reports one first or ctx ends (then with what progress says).
func waitUntil(ctx context.Context, died <-chan error, done func() bool, progress func() string) error {
	for !done() {
		select {
		case err := <-died:
			return fmt.Errorf("stopped early (%s): %v", progress(), err)
		case <-ctx.Done():
			return fmt.Errorf("%s before the timeout", progress())
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

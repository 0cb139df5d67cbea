package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/flakestream/flakestream/idgen"
	"github.com/flakestream/flakestream/internal/orders"
	"github.com/flakestream/flakestream/internal/verify"
	"github.com/flakestream/flakestream/pipeline/audit"
	"github.com/twmb/franz-go/pkg/kgo"
)

// demoAudit is the audit consumer of the demo: in-process, on the numbered
// topic, writing the audit topic exactly once, as `flakestream audit` does.
type demoAudit struct {
	a     *audit.Auditor
	topic string
	stop  context.CancelFunc
	done  chan error

	audited   int
	anomalies map[string]int64
	samples   []string
}

// demoAuditGroup is the group of the demo's audit.
const demoAuditGroup = "flakestream-demo-audit"

// startDemoAudit starts auditing numbered with the defaults of the audit
// command (a 10-minute dup window, 5 s of skew, 5 minutes of lag). The
// demo's numbers come from server 1 (this run) and 2 (an earlier run), so
// those are the allowed servers. extra adds options (a registerer).
func startDemoAudit(ctx context.Context, brokers []string, numbered string, l idgen.Layout, log *slog.Logger, extra ...audit.Opt) (*demoAudit, error) {
	d := &demoAudit{topic: numbered + ".audit", done: make(chan error, 1)}
	a, err := audit.New(append([]audit.Opt{audit.Brokers(brokers...), audit.InputTopics(numbered),
		audit.Topic(d.topic), audit.CreateTopic(), audit.Group(demoAuditGroup),
		audit.InstanceID("demo"), audit.Layout(l), audit.AllowedServers(1, 2),
		audit.Logger(log)}, extra...)...)
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
func (d *demoAudit) finish(ctx context.Context, brokers []string, want int) error {
	defer d.stop()
	for d.a.Stats().Audited < int64(want) {
		select {
		case err := <-d.done:
			return fmt.Errorf("audit stopped early: %v", err)
		case <-ctx.Done():
			return fmt.Errorf("audited %d of %d numbered records before the timeout", d.a.Stats().Audited, want)
		case <-time.After(20 * time.Millisecond):
		}
	}
	d.stop()
	if err := <-d.done; err != nil {
		return err
	}
	s := d.a.Stats()
	d.anomalies = s.Anomalies
	recs, err := verify.ReadCommitted(ctx, brokers, d.topic)
	if err != nil {
		return err
	}
	d.audited = len(recs)
	if d.audited != want {
		return fmt.Errorf("%d audit records for %d numbered records: not exactly once", d.audited, want)
	}
	// A sample of each kind: the first record (numbered by the earlier
	// run, it passed through), and two numbered by this one.
	for i := 0; i < len(recs) && len(d.samples) < 3; i += len(recs)/3 + 1 {
		d.samples = append(d.samples, string(recs[i].Value))
	}
	return nil
}

// flagged is the number of anomalies found.
func (d *demoAudit) flagged() (n int64) {
	for _, v := range d.anomalies {
		n += v
	}
	return n
}

func (d *demoAudit) print(w io.Writer) {
	var kinds []string
	for _, k := range audit.AnomalyKinds() {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, d.anomalies[k]))
	}
	fmt.Fprintf(w, "\naudit: %d numbered records audited exactly once into %s\n  anomalies: %s\n", d.audited, d.topic, strings.Join(kinds, ", "))
	fmt.Fprintln(w, "some audit records (JSON lines, as on the audit topic):")
	for _, s := range d.samples {
		fmt.Fprintf(w, "  %s\n", s)
	}
}

// numberedFirst reorders the orders so that, in each partition, the ones
// an earlier run already numbered come first, as they would in a stream
// that the earlier run fed before this one started: every partition's
// numbers then increase. Interleaved with new orders, an older number
// after a newer one is, truly, a number going backwards in its partition,
// and the audit says so.
func numberedFirst(recs []*kgo.Record, mix orders.Mix) []*kgo.Record {
	out := make([]*kgo.Record, 0, len(recs))
	for i, r := range recs {
		if mix.KindOf(i) == orders.Numbered {
			out = append(out, r)
		}
	}
	for i, r := range recs {
		if mix.KindOf(i) != orders.Numbered {
			out = append(out, r)
		}
	}
	return out
}

package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"time"

	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/idgen"
	"github.com/flakestream/flakestream/internal/orders"
	"github.com/flakestream/flakestream/internal/verify"
	"github.com/flakestream/flakestream/pipeline"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/urfave/cli/v2"
)

// The demo's own flags.
const (
	flagOrders  = "orders"
	flagTimeout = "timeout"
)

// Defaults of the demo, which belongs to the CLI alone.
const (
	defaultDemoOrders  = 100000
	defaultDemoTimeout = 2 * time.Minute
)

// demoConfig is what `flakestream demo` reads from its flags.
type demoConfig struct {
	orders, partitions int
	json, verbose      bool
	timeout            time.Duration
	serve              serveConfig // demo_serve.go
	codec              codecConfig
	schema             schemaConfig
}

func demoCommand() *cli.Command {
	cfg := &demoConfig{}
	return configured(&cli.Command{
		Name:  "demo",
		Usage: "run the whole job in one process on embedded Kafka (kfake) and Redis (miniredis), then check it",
		Flags: concat([]cli.Flag{
			intFlag(flagOrders, &cfg.orders, defaultDemoOrders, "how many order events to number (a few malformed, a few already numbered)"),
			partitionsFlag(&cfg.partitions, "partitions of the demo topics"),
			jsonFlag(&cfg.json, "print the summary as one JSON object"),
			verboseFlag(&cfg.verbose, "log what the worker does"),
			durationFlag(flagTimeout, &cfg.timeout, defaultDemoTimeout, "give up after this long (with --serve: on the shutdown, after Ctrl-C)"),
		}, cfg.schema.flags(), cfg.serve.flags()),
		Action: cfg.run,
	})
}

func (cfg *demoConfig) run(c *cli.Context) error {
	if cfg.serve.on {
		// The live stream builds its own JSON orders; Avro and Protobuf
		// are for the bounded demo. Refused, not silently ignored.
		if cfg.schema.valueFormat != string(codec.ValueJSON) {
			return usageErr("--%s: demo --serve streams JSON orders only; run demo without --serve for --%s %s", flagServe, flagValueFormat, cfg.schema.valueFormat)
		}
		return cfg.runServe(c)
	}
	if err := cfg.serve.unused(c); err != nil {
		return err
	}
	n, parts := cfg.orders, int32(cfg.partitions)
	if n < 1 || parts < 1 {
		return usageErr("--%s and --%s must be at least 1", flagOrders, flagPartitions)
	}
	ctx, cancel := context.WithTimeout(c.Context, cfg.timeout)
	defer cancel()
	log := slog.New(slog.DiscardHandler)
	if cfg.verbose {
		log = slog.New(slog.NewTextHandler(c.App.ErrWriter, nil))
	}
	regKind, stopReg, err := cfg.schema.embeddedRegistry()
	if err != nil {
		return err
	}
	defer stopReg()
	cfg.codec.format = codec.DefaultNumberFormat.String()
	sum, err := runDemo(ctx, n, parts, log, cfg.demoFormat)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	if cfg.json {
		b, _ := json.Marshal(sum.JSON)
		fmt.Fprintf(c.App.Writer, "%s\n", b)
	} else {
		if regKind != "" {
			fmt.Fprintf(c.App.Writer, "value format %s, schema registry %s\n", cfg.schema.valueFormat, regKind)
		}
		sum.print(c.App.Writer)
	}
	if !sum.report.OK() {
		return fmt.Errorf("demo: the output is not exactly once: %s", sum.report)
	}
	if sum.audit.flagged() > 0 {
		return fmt.Errorf("demo: the audit flagged anomalies in clean data: %v", sum.audit.anomalies)
	}
	return nil
}

// demoJSON is the demo's --json output.
type demoJSON struct {
	In            int     `json:"in"`
	Numbered      int     `json:"numbered"`
	Passthrough   int     `json:"passthrough"`
	DLQ           int     `json:"dlq"`
	UniqueNumbers int     `json:"unique_numbers"`
	Duplicates    int     `json:"duplicates"`
	Lost          int     `json:"lost"`
	RecordsPerSec float64 `json:"records_per_sec"`
	// Audited counts the audit topic's records; Anomalies what the audit
	// flagged, by kind, every kind present.
	Audited   int              `json:"audited"`
	Anomalies map[string]int64 `json:"anomalies"`
}

type demoSummary struct {
	JSON    demoJSON
	report  verify.Report
	took    time.Duration
	samples []*kgo.Record
	layout  idgen.Layout
	dlq     map[string]int
	audit   *demoAudit
}

// demoFormat is the Format the demo numbers with: JSON through cd, or the
// --value-format through the registry, with cd's rules.
func (cfg *demoConfig) demoFormat(cd *codec.Codec, l idgen.Layout, output string) (codec.Format, error) {
	cfg.codec.maxBytes = 64 << 10
	return cfg.codec.valueFormat(&cfg.schema, cd, l, output)
}

// runDemo runs the demo; format returns the value format the worker
// numbers with.
func runDemo(ctx context.Context, n int, parts int32, log *slog.Logger,
	format func(cd *codec.Codec, l idgen.Layout, output string) (codec.Format, error)) (*demoSummary, error) {
	const input, output, dlqTopic = "orders", "orders.numbered", "orders.dlq"
	emb, err := startEmbedded(parts, []string{input, output, dlqTopic}, nil, nil)
	if err != nil {
		return nil, err
	}
	defer emb.close()
	brokers, gen, cd := emb.brokers, emb.gen, emb.cd

	vf, err := format(cd, gen.Layout(), output)
	if err != nil {
		return nil, err
	}
	events, err := demoEvents(ctx, vf, input)
	if err != nil {
		return nil, err
	}
	inputs, err := produceDemoOrders(ctx, brokers, input, parts, n, gen.Layout(), events)
	if err != nil {
		return nil, err
	}

	took, err := runDemoWorker(ctx, n, append(demoWorkerOptions(brokers, input, output, dlqTopic, gen, cd, log), pipeline.Format(vf)))
	if err != nil {
		return nil, err
	}
	// The audit runs after the worker, so that the worker's figure above
	// is its own.
	audit, err := startDemoAudit(ctx, brokers, output, gen.Layout(), log)
	if err != nil {
		return nil, err
	}

	out, err := verify.ReadCommitted(ctx, brokers, output)
	if err != nil {
		return nil, err
	}
	dl, err := verify.ReadCommitted(ctx, brokers, dlqTopic)
	if err != nil {
		return nil, err
	}
	rep := verify.CheckFormat(ctx, vf, inputs, out, dl)
	if err := audit.finish(ctx, brokers, len(out)); err != nil {
		return nil, err
	}
	sum := newDemoSummary(rep, took, gen.Layout(), audit, out, dl)
	sum.JSON.RecordsPerSec = float64(n) / took.Seconds()
	return sum, nil
}

// newDemoSummary is the summary of a demo run from its accounting (rep),
// its audit, and the output and dead letters it read back.
func newDemoSummary(rep verify.Report, took time.Duration, l idgen.Layout, audit *demoAudit, out, dl []*kgo.Record) *demoSummary {
	sum := &demoSummary{report: rep, took: took, layout: l, dlq: map[string]int{}, audit: audit}
	sum.JSON = demoJSON{
		In: rep.In, Numbered: rep.Numbered, Passthrough: rep.Passthrough, DLQ: rep.DLQ,
		UniqueNumbers: rep.Unique, Duplicates: rep.Numbered + rep.Passthrough - rep.Unique, Lost: rep.Lost,
		Audited: audit.audited, Anomalies: audit.anomalies,
	}
	for _, d := range dl {
		class, _ := verify.Header(d, codec.HeaderErrorClass)
		sum.dlq[class]++
	}
	for i := 0; i < len(out) && len(sum.samples) < 3; i += len(out)/3 + 1 {
		sum.samples = append(sum.samples, out[i])
	}
	return sum
}

// runDemoWorker runs a worker with opts until it has read all n orders,
// then stops it, and returns how long the n took.
func runDemoWorker(ctx context.Context, n int, opts []pipeline.Opt) (time.Duration, error) {
	w, err := pipeline.NewWorker(opts...)
	if err != nil {
		return 0, err
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- w.Run(wctx) }()
	for w.Stats().In < int64(n) {
		select {
		case err := <-done:
			return 0, fmt.Errorf("worker stopped early: %v", err)
		case <-ctx.Done():
			return 0, fmt.Errorf("worker numbered %d of %d orders before the timeout", w.Stats().In, n)
		case <-time.After(20 * time.Millisecond):
		}
	}
	took := time.Since(start)
	stop()
	if err := <-done; err != nil {
		return 0, err
	}
	return took, nil
}

// produceDemoOrders writes the demo's n orders to input and returns them.
// events, if set, makes the orders (Avro or Protobuf, see demoRecords)
// instead of the JSON mix.
func produceDemoOrders(ctx context.Context, brokers []string, input string, parts int32, n int, l idgen.Layout, events func(int) []byte) ([]*kgo.Record, error) {
	// The orders: one in a thousand malformed (every dead-letter class in
	// turn), two in a thousand already numbered.
	// The numbered ones carry numbers an earlier run (server 2) issued a
	// minute before, and come first in their partitions (see numberedFirst):
	// clean data, which the audit finds clean.
	earlier, err := l.Compose(time.Now().Add(-time.Minute).UnixMilli(), 2, 1, 0)
	if err != nil {
		return nil, err
	}
	mix := orders.Mix{BadPerMille: 1, NumberedPerMille: 2}
	var inputs []*kgo.Record
	if events != nil {
		inputs = demoRecords(input, parts, n, events)
	} else {
		inputs = numberedFirst(orders.Records(input, parts, n, mix, 200, earlier), mix)
	}
	prod, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return nil, err
	}
	for i := 0; i < len(inputs); i += 10000 {
		if err := prod.ProduceSync(ctx, inputs[i:min(i+10000, len(inputs))]...).FirstErr(); err != nil {
			prod.Close()
			return nil, fmt.Errorf("produce orders: %w", err)
		}
	}
	prod.Close()
	return inputs, nil
}

// demoWorkerGroup is the group of the demo's worker.
const demoWorkerGroup = "flakestream-demo"

// demoRecords are the demo's n Avro or Protobuf orders over parts
// partitions, one in a thousand bad, each of the registry's dead-letter
// classes in turn: not framed (a JSON value), an unknown schema ID, a
// payload cut short (undecodable).
func demoRecords(topic string, parts int32, n int, events func(int) []byte) []*kgo.Record {
	recs := make([]*kgo.Record, n)
	for i := range recs {
		v := events(i)
		if i%1000 == 999 {
			switch (i / 1000) % 3 {
			case 0:
				v = []byte(`{"event":"order_created"}`)
			case 1:
				v = append([]byte{0, 0x7f, 0xff, 0xff, 0xfe}, v[5:]...)
			case 2:
				v = v[:len(v)-3]
			}
		}
		recs[i] = &kgo.Record{Topic: topic, Partition: int32(i) % parts, Key: []byte(fmt.Sprintf("order-%d", i)), Value: v}
	}
	return recs
}

// demoWorkerOptions are the options of the demo's worker: the one place
// the demo builds them.
func demoWorkerOptions(brokers []string, input, output, dlq string, gen *idgen.Generator, cd *codec.Codec, log *slog.Logger) []pipeline.Opt {
	return []pipeline.Opt{pipeline.Brokers(brokers...), pipeline.InputTopics(input), pipeline.OutputTopic(output),
		pipeline.DLQTopic(dlq), pipeline.Group(demoWorkerGroup), pipeline.InstanceID("demo"),
		pipeline.Numbers(gen), pipeline.Codec(cd), pipeline.Logger(log)}
}

func (s *demoSummary) print(w io.Writer) {
	j := s.JSON
	fmt.Fprintf(w, "flakestream demo: %d orders numbered in %s (%.0f records/s) on in-process Kafka (kfake) and Redis (miniredis)\n\n",
		j.In, s.took.Round(time.Millisecond), j.RecordsPerSec)
	fmt.Fprintf(w, "  in           %7d\n  numbered     %7d\n  passthrough  %7d  (already carried a valid number)\n  dead-lettered%7d  %v\n",
		j.In, j.Numbered, j.Passthrough, j.DLQ, s.dlq)
	fmt.Fprintf(w, "  unique numbers %5d, duplicates %d, lost %d: ", j.UniqueNumbers, j.Duplicates, j.Lost)
	if s.report.OK() {
		fmt.Fprintln(w, "exactly once, byte for byte, per-partition order kept")
	} else {
		fmt.Fprintf(w, "NOT exactly once: %s\n", s.report)
	}
	fmt.Fprintf(w, "\nsome numbered orders, decoded (layout %s):\n", s.layout)
	for _, r := range s.samples {
		num, _ := verify.Header(r, codec.HeaderNumber)
		id, _ := idgen.ParseID(num)
		p, _ := s.layout.Decompose(id)
		fmt.Fprintf(w, "  %s\n    -> %s\n", trim(r.Value, 110), decoded(p).AppendJSON(nil))
	}
	s.audit.print(w)
}

func trim(b []byte, n int) string {
	if len(b) > 0 && b[0] != '{' {
		// Avro or Protobuf: the bytes, quoted, so the terminal shows text.
		// (Quoted once: the quoted text does not start with '{' either.)
		b = []byte(strconv.Quote(string(b)))
	}
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n/2]) + " ... " + string(b[len(b)-n/2:])
}

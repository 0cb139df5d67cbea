package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/flakestream/flakestream/audit"
	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/idgen"
	"github.com/flakestream/flakestream/internal/demo"
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
	sum, err := demo.Run(ctx, n, parts, log, cfg.demoFormat)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	return cfg.finish(c.App.Writer, "demo", sum, func(w io.Writer) {
		if regKind != "" {
			fmt.Fprintf(w, "value format %s, schema registry %s\n", cfg.schema.valueFormat, regKind)
		}
		printSummary(w, sum)
	})
}

// demoFormat is the Format the demo numbers with: JSON through cd, or the
// --value-format through the registry, with cd's rules.
func (cfg *demoConfig) demoFormat(cd *codec.Codec, l idgen.Layout, output string) (codec.Format, error) {
	cfg.codec.maxBytes = demo.MaxBytes
	return cfg.codec.valueFormat(&cfg.schema, cd, l, output)
}

// printSummary prints what a demo found.
func printSummary(w io.Writer, s *demo.Summary) {
	j := s.Counts
	fmt.Fprintf(w, "flakestream demo: %d orders numbered in %s (%.0f records/s) on in-process Kafka (kfake) and Redis (miniredis)\n\n",
		j.In, s.Took.Round(time.Millisecond), j.RecordsPerSec)
	fmt.Fprintf(w, "  in           %7d\n  numbered     %7d\n  passthrough  %7d  (already carried a valid number)\n  dead-lettered%7d  %v\n",
		j.In, j.Numbered, j.Passthrough, j.DLQ, s.DeadLetters)
	fmt.Fprintf(w, "  unique numbers %5d, duplicates %d, lost %d: ", j.UniqueNumbers, j.Duplicates, j.Lost)
	if s.Exact() {
		fmt.Fprintln(w, "exactly once, every number unique")
	} else {
		fmt.Fprintf(w, "NOT exactly once: %s\n", s.Accounting())
	}
	fmt.Fprintf(w, "\nsome numbered orders, decoded (layout %s):\n", s.Layout)
	for _, r := range s.Samples {
		num, _ := codec.LastHeader(r.Headers, codec.HeaderNumber)
		id, _ := idgen.ParseID(string(num))
		p, _ := s.Layout.Decompose(id)
		fmt.Fprintf(w, "  %s\n    -> %s\n", trim(r.Value, 110), decoded(p).AppendJSON(nil))
	}
	var kinds []string
	for _, k := range audit.AnomalyKinds() {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, s.Anomalies[k]))
	}
	fmt.Fprintf(w, "\naudit: %d numbered records audited exactly once into %s\n  anomalies: %s\n", s.Audited, s.AuditTopic, strings.Join(kinds, ", "))
	fmt.Fprintln(w, "some audit records (JSON lines, as on the audit topic):")
	for _, a := range s.AuditSamples {
		fmt.Fprintf(w, "  %s\n", a)
	}
}

// finish prints a demo's summary to w, as one JSON object with --json,
// else as text, and returns its result.
func (cfg *demoConfig) finish(w io.Writer, what string, s *demo.Summary, text func(io.Writer)) error {
	if cfg.json {
		b, _ := json.Marshal(s.Counts)
		fmt.Fprintf(w, "%s\n", b)
	} else {
		text(w)
	}
	return demoResult(what, s)
}

// demoResult is the exit of a demo: an error when it was not exactly
// once or its audit flagged anything in clean data.
func demoResult(what string, s *demo.Summary) error {
	if !s.Exact() {
		return fmt.Errorf("%s: the output is not exactly once: %s", what, s.Accounting())
	}
	if s.Flagged() > 0 {
		return fmt.Errorf("%s: the audit flagged anomalies in clean data: %v", what, s.Anomalies)
	}
	return nil
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

package cli

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/flakestream/flakestream/internal/demo"
	"github.com/urfave/cli/v2"
)

// The flags of `demo --serve`.
const (
	flagServe         = "serve"
	flagRate          = "rate"
	flagStopAfter     = "stop-after"
	flagAuditHTTPAddr = "audit-http-addr"
)

// Defaults of `demo --serve`, which belong to the CLI alone.
const (
	defaultServeRate          = 1000
	defaultServeHTTPAddr      = "127.0.0.1:9464"
	defaultServeAuditHTTPAddr = "127.0.0.1:9465"
	// maxServeRate bounds --rate: past it the embedded stack on one machine
	// falls behind anyway, and the in-flight orders the accounting holds
	// grow with the rate.
	maxServeRate = 100000
)

// serveConfig is what `demo --serve` reads from its flags.
type serveConfig struct {
	on                  bool
	rate                int
	stopAfter           time.Duration
	httpAddr, auditAddr string
}

func (s *serveConfig) flags() []cli.Flag {
	return []cli.Flag{
		boolFlag(flagServe, &s.on, "keep the demo running with a steady order stream, serve the audit's live page and both /metrics, and check exactly once on Ctrl-C"),
		intFlag(flagRate, &s.rate, defaultServeRate, "with --serve: orders a second (one in a thousand malformed, every dead-letter class in turn)"),
		durationFlag(flagStopAfter, &s.stopAfter, 0, "with --serve: stop by itself after this long (0: run until Ctrl-C)"),
		stringFlag(flagHTTPAddr, &s.httpAddr, defaultServeHTTPAddr, "with --serve: serve the worker's /metrics, /healthz and /readyz on this address"),
		stringFlag(flagAuditHTTPAddr, &s.auditAddr, defaultServeAuditHTTPAddr, "with --serve: serve the audit's live page and /metrics on this address"),
	}
}

// unused refuses the flags only --serve reads on a one-shot demo, where
// they would quietly do nothing. (Not --http-addr: its FLAKESTREAM_HTTP_ADDR
// may be set for run or audit.)
func (s *serveConfig) unused(c *cli.Context) error {
	for _, f := range []string{flagRate, flagStopAfter, flagAuditHTTPAddr} {
		if c.IsSet(f) {
			return usageErr("--%s needs --%s", f, flagServe)
		}
	}
	return nil
}

// runServe is `demo --serve`: the embedded stack kept running until the
// first signal (or --stop-after), then stopped in order and accounted for.
func (cfg *demoConfig) runServe(c *cli.Context) error {
	s := &cfg.serve
	if c.IsSet(flagOrders) {
		return usageErr("--%s is for the one-shot demo; --%s runs until Ctrl-C (or --%s)", flagOrders, flagServe, flagStopAfter)
	}
	if s.rate < 1 || s.rate > maxServeRate {
		return usageErr("--%s %d: want 1 to %d orders a second", flagRate, s.rate, maxServeRate)
	}
	if cfg.partitions < 1 {
		return usageErr("--%s must be at least 1", flagPartitions)
	}
	if s.stopAfter < 0 {
		return usageErr("--%s %s: want 0 (until Ctrl-C) or more", flagStopAfter, s.stopAfter)
	}
	log := slog.New(slog.DiscardHandler)
	if cfg.verbose {
		log = slog.New(slog.NewTextHandler(c.App.ErrWriter, nil))
	}
	// Human lines go to standard output, unless that is for --json.
	out := c.App.Writer
	if cfg.json {
		out = c.App.ErrWriter
	}
	sum, err := demo.Serve(c.Context, demo.ServeConfig{
		Partitions: int32(cfg.partitions), Rate: s.rate, StopAfter: s.stopAfter,
		HTTPAddr: s.httpAddr, AuditHTTPAddr: s.auditAddr, WorkerRegistry: newRegistry(), AuditRegistry: newRegistry(),
		Timeout: cfg.timeout, Log: log,
	}, out)
	if ae, ok := errors.AsType[*demo.AddrError](err); ok {
		flag := flagHTTPAddr
		if ae.Audit {
			flag = flagAuditHTTPAddr
		}
		return fmt.Errorf("demo --serve: --%s %s: %w", flag, ae.Addr, ae.Err)
	}
	if err != nil {
		return fmt.Errorf("demo --serve: %w", err)
	}
	return cfg.finish(c.App.Writer, "demo --serve", sum, func(w io.Writer) {
		printSummary(w, sum)
		printHeld(w, sum)
	})
}

// printHeld prints what the accounting of `demo --serve` held and what
// the embedded Kafka deleted.
func printHeld(w io.Writer, s *demo.Summary) {
	fmt.Fprintf(w, "\nmemory: the accounting held at most %d offsets in flight and %d numbers (its %s uniqueness window);\n",
		s.Held.InFlight, s.Held.Numbers, s.Window)
	fmt.Fprintf(w, "  the embedded Kafka deleted %d records once every reader had read them", s.Deleted)
	if s.TrimFailures > 0 {
		fmt.Fprintf(w, " (%d deletions failed, the last: %v)", s.TrimFailures, s.LastTrimErr)
	}
	fmt.Fprintln(w)
}

package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/pprof"
	"strings"
	"time"

	"github.com/flakestream/flakestream/eos"
	"github.com/flakestream/flakestream/pipeline"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/urfave/cli/v2"
)

// The operations group: logs, metrics and health, and the output switches
// of the one-shot commands.
const (
	flagHTTPAddr  = "http-addr"
	flagPprof     = "pprof"
	flagLogFormat = "log-format"
	flagLogLevel  = "log-level"
	flagJSON      = "json"
	flagVerbose   = "verbose"
)

// Defaults of the operations flags, which belong to the CLI alone.
const (
	defaultRunHTTPAddr   = ":9464"
	defaultAuditHTTPAddr = ":9465"
	defaultLogFormat     = "text"
	defaultLogLevel      = "info"
)

type opsConfig struct {
	httpAddr, logFormat, logLevel string
	memoryLimit                   string
	pprof                         bool
}

// flags are the operations flags of a long-running command serving its
// metrics on httpAddr by default.
func (o *opsConfig) flags(httpAddr string) []cli.Flag {
	return append([]cli.Flag{
		stringFlag(flagHTTPAddr, &o.httpAddr, httpAddr, "serve /metrics, /healthz and /readyz on this address (\"\" turns it off)"),
		boolFlag(flagPprof, &o.pprof, "also serve Go's profiles under /debug/pprof/ on --http-addr (CPU, heap, goroutines: what a slow or stuck process is doing); off by default, as they show the process's internals to whoever reaches the address"),
		o.memoryLimitFlag(),
	}, o.logFlags()...)
}

func (o *opsConfig) logFlags() []cli.Flag {
	return []cli.Flag{
		stringFlag(flagLogFormat, &o.logFormat, defaultLogFormat, "log format: text or json"),
		stringFlag(flagLogLevel, &o.logLevel, defaultLogLevel, "log level: trace, debug, info, warn or error (trace adds franz-go's own debug lines: every request's outcome, partition by partition)"),
	}
}

// logger builds the structured logger the flags describe, writing to w
// (the app's standard error, or what draws on it).
func (o *opsConfig) logger(w io.Writer) (*slog.Logger, error) {
	level, err := parseLogLevel(o.logLevel)
	if err != nil {
		return nil, err
	}
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: nameTrace}
	switch o.logFormat {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, usageErr("--%s %q: want text or json", flagLogFormat, o.logFormat)
}

// parseLogLevel reads --log-level: slog's names, and trace (eos.LevelTrace),
// below debug, where franz-go's debug lines are passed through too.
func parseLogLevel(s string) (slog.Level, error) {
	if strings.EqualFold(s, "trace") {
		return eos.LevelTrace, nil
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(s)); err != nil {
		return 0, usageErr("--%s %q: want trace, debug, info, warn or error", flagLogLevel, s)
	}
	return level, nil
}

// nameTrace writes eos.LevelTrace as TRACE rather than slog's DEBUG-4.
func nameTrace(_ []string, a slog.Attr) slog.Attr {
	if a.Key == slog.LevelKey {
		if l, ok := a.Value.Any().(slog.Level); ok && l == eos.LevelTrace {
			a.Value = slog.StringValue("TRACE")
		}
	}
	return a
}

// serve serves /metrics from reg, /healthz, /readyz (from ready) and the
// extra handlers on --http-addr until ctx ends, when the flag is set; paths
// names what is served in the log line.
func (o *opsConfig) serve(ctx context.Context, reg *prometheus.Registry, ready func() error, extra map[string]http.Handler, log *slog.Logger, paths string) error {
	if o.httpAddr == "" {
		if o.pprof {
			return usageErr("--%s needs --%s: the profiles are served on it", flagPprof, flagHTTPAddr)
		}
		return nil
	}
	if o.pprof {
		extra = withPprof(extra)
		paths += " and /debug/pprof/"
	}
	bound, err := pipeline.Serve(ctx, o.httpAddr, reg, ready, extra, log)
	if err != nil {
		return fmt.Errorf("--%s %s: %w", flagHTTPAddr, o.httpAddr, err)
	}
	log.Info("serving "+paths, "addr", bound.String())
	return nil
}

// withPprof returns extra with net/http/pprof's handlers added, as that
// package registers them on the default mux (which flakestream does not
// serve): the index and every named profile under /debug/pprof/, and the
// CPU profile, the execution trace, the command line and symbol lookup.
func withPprof(extra map[string]http.Handler) map[string]http.Handler {
	m := maps.Clone(extra)
	if m == nil {
		m = map[string]http.Handler{}
	}
	m["/debug/pprof/"] = http.HandlerFunc(pprof.Index)
	m["/debug/pprof/cmdline"] = http.HandlerFunc(pprof.Cmdline)
	m["/debug/pprof/profile"] = http.HandlerFunc(pprof.Profile)
	m["/debug/pprof/symbol"] = http.HandlerFunc(pprof.Symbol)
	m["/debug/pprof/trace"] = http.HandlerFunc(pprof.Trace)
	return m
}

func jsonFlag(dst *bool, usage string) cli.Flag { return boolFlag(flagJSON, dst, usage) }

func verboseFlag(dst *bool, usage string) cli.Flag { return boolFlag(flagVerbose, dst, usage) }

// newRegistry returns a registry with the Go runtime and process collectors.
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// withTimeout runs f with ctx bounded by d.
func withTimeout(ctx context.Context, d time.Duration, f func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return f(ctx)
}

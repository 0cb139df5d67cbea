package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/flakestream/flakestream/eos"
	"github.com/flakestream/flakestream/pipeline"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/exporter-toolkit/web"
	"github.com/urfave/cli/v2"
)

// The operations group: logs, metrics and health, and the output switches
// of the one-shot commands.
const (
	flagHTTPAddr  = "http-addr"
	flagPprof     = "pprof"
	flagPprofAddr = "pprof-addr"
	flagWebConfig = "web-config-file"
	flagLogFormat = "log-format"
	flagLogLevel  = "log-level"
	flagJSON      = "json"
	flagVerbose   = "verbose"
)

// Defaults of the operations flags, which belong to the CLI alone.
const (
	defaultRunHTTPAddr   = ":9464"
	defaultAuditHTTPAddr = ":9465"
	// What the deprecated --pprof listens on.
	legacyRunPprofAddr   = "127.0.0.1:6060"
	legacyAuditPprofAddr = "127.0.0.1:6061"
	defaultLogFormat     = "text"
	defaultLogLevel      = "info"
)

type opsConfig struct {
	httpAddr, logFormat, logLevel string
	memoryLimit                   string
	pprofAddr                     string
	webConfig                     string
	// pprof is the deprecated --pprof, which serves the profiles on
	// pprofLegacyAddr.
	pprof           bool
	pprofLegacyAddr string
}

// flags are the operations flags of a long-running command serving its
// metrics on httpAddr by default; the deprecated --pprof serves the
// profiles on pprofAddr.
func (o *opsConfig) flags(httpAddr, pprofAddr string) []cli.Flag {
	o.pprofLegacyAddr = pprofAddr
	return append([]cli.Flag{
		stringFlag(flagHTTPAddr, &o.httpAddr, httpAddr, "serve /metrics, /healthz and /readyz on this address (\"\" turns it off)"),
		stringFlag(flagPprofAddr, &o.pprofAddr, "", "serve Go's profiles under /debug/pprof/ (CPU, heap, goroutines: what a slow or stuck process is doing) on this address, apart from --http-addr; a port alone (6060 or :6060) listens on 127.0.0.1 only, give a host (0.0.0.0:6060) to listen elsewhere (default: off)"),
		stringFlag(flagWebConfig, &o.webConfig, "", "Prometheus web configuration `FILE` (exporter-toolkit's format: tls_server_config, basic_auth_users with bcrypt hashes, http_server_config) for --http-addr and --pprof-addr: TLS, client certificates and basic auth (default: plain HTTP, no authentication)"),
		boolFlag(flagPprof, &o.pprof, "deprecated, use --"+flagPprofAddr+": serves the profiles on "+pprofAddr+", no longer on --http-addr"),
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

// start is how a long-running command begins: the logger the flags
// describe (writing to w), the soft memory limit, and the listeners'
// settings checked before anything connects.
func (o *opsConfig) start(w io.Writer) (*slog.Logger, error) {
	log, err := o.logger(w)
	if err != nil {
		return nil, err
	}
	if err := o.applyMemoryLimit(log, memlimit.FromCgroup); err != nil {
		return nil, err
	}
	if err := o.checkServe(); err != nil {
		return nil, err
	}
	return log, nil
}

// checkServe checks the listeners' settings before anything connects: the
// --web-config-file can be read, its users' hashes and its certificates
// loaded.
func (o *opsConfig) checkServe() error {
	if err := web.Validate(o.webConfig); err != nil {
		return usageErr("--%s %s: %v", flagWebConfig, o.webConfig, err)
	}
	return nil
}

// serve serves /metrics from reg, /healthz, /readyz (from ready) and the
// extra handlers on --http-addr until ctx ends, when the flag is set, and
// the profiles on --pprof-addr when that is; paths names what is served in
// the log line.
func (o *opsConfig) serve(ctx context.Context, reg *prometheus.Registry, ready func() error, extra map[string]http.Handler, log *slog.Logger, paths string) error {
	if err := o.servePprof(ctx, log); err != nil {
		return err
	}
	if o.httpAddr == "" {
		return nil
	}
	h, err := pipeline.Handler(reg, ready, extra)
	if err != nil {
		return err
	}
	bound, err := o.serveHTTP(ctx, o.httpAddr, h, log)
	if err != nil {
		return fmt.Errorf("--%s %s: %w", flagHTTPAddr, o.httpAddr, err)
	}
	log.Info("serving "+paths, "addr", bound.String())
	return nil
}

// serveHTTP serves h on addr until ctx ends, with the TLS and basic auth of
// --web-config-file when it is given, and returns the address bound.
func (o *opsConfig) serveHTTP(ctx context.Context, addr string, h http.Handler, log *slog.Logger) (net.Addr, error) {
	return pipeline.ServeHandler(ctx, addr, h, func(l net.Listener, srv *http.Server) error {
		// exporter-toolkit logs what it serves (TLS or not) at info.
		return web.Serve(l, srv, &web.FlagConfig{WebConfigFile: &o.webConfig}, log.With("listener", l.Addr().String()))
	}, log)
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

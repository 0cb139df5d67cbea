package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
)

// servePprof serves Go's profiles on --pprof-addr (or, for the deprecated
// --pprof, on the command's loopback address) until ctx ends; neither set
// serves nothing.
func (o *opsConfig) servePprof(ctx context.Context, log *slog.Logger) error {
	addr := o.pprofAddr
	if o.pprof {
		if addr == "" {
			addr = o.pprofLegacyAddr
		}
		log.Warn("--"+flagPprof+" is deprecated: the profiles are no longer on --"+flagHTTPAddr+"; use --"+flagPprofAddr, "pprof_addr", addr)
	}
	if addr == "" {
		return nil
	}
	addr, err := loopbackByDefault(addr)
	if err != nil {
		return usageErr("--%s %q: %v", flagPprofAddr, o.pprofAddr, err)
	}
	bound, err := o.serveHTTP(ctx, addr, pprofHandler(), log)
	if err != nil {
		return fmt.Errorf("--%s %s: %w", flagPprofAddr, addr, err)
	}
	log.Info("serving /debug/pprof/", "addr", bound.String())
	return nil
}

// loopbackByDefault is addr with 127.0.0.1 as its host when it gives only a
// port ("6060" or ":6060"): the profiles show the process's internals, so
// listening on every interface must be asked for by name (0.0.0.0:6060).
func loopbackByDefault(addr string) (string, error) {
	if !strings.Contains(addr, ":") {
		addr = ":" + addr
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), nil
}

// pprofHandler serves net/http/pprof's handlers as that package registers
// them on the default mux (which flakestream does not serve): the index,
// every named profile, the CPU profile, the execution trace and symbol
// lookup. Not the command line: /debug/pprof/cmdline would print every
// flag, passwords included, so it is 404 like any unknown path.
func pprofHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", http.NotFound)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

// profiler takes a CPU profile of the worker once the steady window opens:
// GET <base>/debug/pprof/profile?seconds=N (flakestream run --pprof, or
// copyloop -pprof-addr) into a file. The worker serves it; measure only
// asks, so the profile is of the worker process alone.
type profiler struct {
	base    string // http://host:port of the worker's pprof handlers; "" turns it off
	out     string
	seconds int
	done    chan error
}

// start asks for the profile in the background, once.
func (p *profiler) start(ctx context.Context) {
	if p.base == "" || p.done != nil {
		return
	}
	p.done = make(chan error, 1)
	go func() {
		if err := p.fetch(ctx); err != nil {
			p.done <- fmt.Errorf("cpu profile: %w", err)
		}
		close(p.done)
	}()
}

func (p *profiler) fetch(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(p.seconds)*time.Second+30*time.Second)
	defer cancel()
	return getInto(ctx, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", p.base, p.seconds), p.out)
}

// getInto writes the body of a GET of url to the file out, or says why
// it could not.
func getInto(ctx context.Context, url, out string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 512))
		return fmt.Errorf("GET %s: %s: %s", url, res.Status, b)
	}
	return writeFile(out, res.Body)
}

// wait returns the profile's error; nil if none was asked for. The worker
// keeps running after the backlog, so a backlog drained before the profile
// ends leaves idle time in the profile's tail, which is no error.
func (p *profiler) wait() error {
	if p.done == nil {
		if p.base != "" {
			return fmt.Errorf("cpu profile: the steady window never opened")
		}
		return nil
	}
	return <-p.done // nil once closed
}

// saveMetrics writes the worker's /metrics to out (flakestream's
// flakestream_txn_phase_seconds: where each transaction's time went).
func saveMetrics(ctx context.Context, base, out string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return getInto(ctx, base+"/metrics", out)
}

// writeFile writes r to path whole, or reports why not, leaving no
// half-written file behind.
func writeFile(path string, r io.Reader) error {
	f, err := os.Create(path + ".part")
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		os.Remove(path + ".part")
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		os.Remove(path + ".part")
		return err
	}
	return os.Rename(path+".part", path)
}

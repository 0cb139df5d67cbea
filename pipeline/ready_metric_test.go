package pipeline

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/flakestream/flakestream/test/pipetest"
	"github.com/prometheus/client_golang/prometheus"
)

// flakestream_ready on /metrics says what /readyz says, at every scrape.
func TestReadyMetricFollowsReadyz(t *testing.T) {
	var ready atomic.Bool
	reg := prometheus.NewRegistry()
	addr, err := Serve(t.Context(), "127.0.0.1:0", reg, func() error {
		if ready.Load() {
			return nil
		}
		return errors.New("not in the consumer group yet")
	}, nil, pipetest.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string) (int, string) {
		t.Helper()
		res, err := http.Get("http://" + addr.String() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	for _, c := range []struct {
		ready  bool
		status int
		line   string
	}{{false, http.StatusServiceUnavailable, "\nflakestream_ready 0\n"}, {true, http.StatusOK, "\nflakestream_ready 1\n"},
		{false, http.StatusServiceUnavailable, "\nflakestream_ready 0\n"}} {
		ready.Store(c.ready)
		if code, _ := get("/readyz"); code != c.status {
			t.Errorf("ready %v: /readyz %d, want %d", c.ready, code, c.status)
		}
		if _, body := get("/metrics"); !strings.Contains(body, c.line) {
			t.Errorf("ready %v: /metrics without %q", c.ready, strings.TrimSpace(c.line))
		}
	}
	// A second Serve on the same registry is refused with an error, not a
	// panic.
	if _, err := Serve(t.Context(), "127.0.0.1:0", reg, func() error { return nil }, nil, pipetest.Logger(t)); err == nil {
		t.Error("a second Serve on one registry: no error")
	}
}

package cli

import (
	"bytes"
	"errors"
	"log/slog"
	"math"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

func TestMemoryLimit(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	const gib = 1 << 30
	container := func(total uint64, err error) memlimit.Provider {
		return func() (uint64, error) { return total, err }
	}
	for _, tc := range []struct {
		spec   string
		cgroup memlimit.Provider
		want   int64 // the limit after; math.MaxInt64: none
		err    string
	}{
		{spec: "256MiB", want: 256 << 20},
		{spec: "2GiB", want: 2 * gib},
		{spec: "1000000", want: 1000000},
		{spec: "512KiB", want: 512 << 10},
		{spec: "90%", cgroup: container(gib, nil), want: 966367641},
		{spec: "50%", cgroup: container(0, memlimit.ErrNoLimit), want: math.MaxInt64},
		{spec: "off", want: math.MaxInt64},
		{spec: "90%", cgroup: container(0, errors.New("mountinfo: permission denied")), want: math.MaxInt64, err: "reading the container's memory limit: mountinfo: permission denied"},
		{spec: "0%", err: "want a percentage"},
		{spec: "150%", err: "want a percentage"},
		{spec: "lots", err: "want a size such as 256MiB"},
		{spec: "-1MiB", err: "want a size such as 256MiB"},
		{spec: "0", err: "want a size such as 256MiB"},
		{spec: "9999999TiB", err: "want a size such as 256MiB"},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			debug.SetMemoryLimit(math.MaxInt64)
			var logs bytes.Buffer
			o := &opsConfig{memoryLimit: tc.spec}
			err := o.applyMemoryLimit(slog.New(slog.NewTextHandler(&logs, nil)), tc.cgroup)
			if tc.err != "" {
				tc.want = math.MaxInt64 // a refused value sets nothing
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one containing %q", err, tc.err)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if got := debug.SetMemoryLimit(-1); got != tc.want {
				t.Errorf("limit %d, want %d", got, tc.want)
			}
			if tc.want != math.MaxInt64 && !strings.Contains(logs.String(), "soft memory limit") {
				t.Errorf("no log line of the limit: %q", logs.String())
			}
		})
	}
}

// GOMEMLIMIT, the Go runtime's own setting, wins over --memory-limit.
func TestMemoryLimitEnvironmentWins(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "300MiB")
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	debug.SetMemoryLimit(math.MaxInt64)
	var logs bytes.Buffer
	o := &opsConfig{memoryLimit: "64MiB"}
	if err := o.applyMemoryLimit(slog.New(slog.NewTextHandler(&logs, nil)), nil); err != nil {
		t.Fatal(err)
	}
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("limit %d: --memory-limit overrode GOMEMLIMIT", got)
	}
	if !strings.Contains(logs.String(), "GOMEMLIMIT") {
		t.Errorf("the log does not say GOMEMLIMIT is used: %q", logs.String())
	}
}

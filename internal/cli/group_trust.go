package cli

import (
	"strings"
	"time"

	"github.com/flakestream/flakestream/idgen"
	"github.com/flakestream/flakestream/pipeline"
	"github.com/urfave/cli/v2"
)

// The trust group: which pre-filled numbers the worker believes (run and
// replay). --allowed-servers, --allowed-workers and --max-skew are the
// audit's flags by name, parsing and meaning, so one configuration file can
// hold them for both.
const flagOnRejectedNumber = "on-rejected-number"

// On --on-rejected-number.
const (
	onRejectedDLQ      = "dlq"
	onRejectedRenumber = "renumber"
)

type trustConfig struct {
	allowedServers, allowedWorkers string
	maxSkew                        time.Duration
	onRejected                     string
}

func (tc *trustConfig) flags() []cli.Flag {
	return []cli.Flag{
		stringFlag(flagAllowedServers, &tc.allowedServers, "", "server IDs a pre-filled number may carry, comma-separated, ranges too (\"1,2,5-7\"); any other is rejected as unknown_server (default: any)"),
		stringFlag(flagAllowedWorkers, &tc.allowedWorkers, "", "worker IDs a pre-filled number may carry, comma-separated, ranges too (\"1,2,5-7\"); any other is rejected as unknown_worker (default: any)"),
		durationFlag(flagMaxSkew, &tc.maxSkew, pipeline.DefaultMaxSkew, "a pre-filled number whose time is more than this ahead of the clock is rejected as future_number (negative turns the check off)"),
		stringFlag(flagOnRejectedNumber, &tc.onRejected, onRejectedDLQ, "what happens to a record whose pre-filled number is rejected (invalid_number, unknown_server, unknown_worker, future_number, key_mismatch): dlq dead-letters it, renumber gives it a fresh number (the key's number on key_mismatch) and the flakestream-renumbered header"),
	}
}

// trust returns the pipeline option the flags describe, for numbers of
// layout l.
func (tc *trustConfig) trust(l idgen.Layout) (pipeline.Opt, error) {
	t := pipeline.Trust{Layout: &l, MaxSkew: tc.maxSkew}
	switch tc.onRejected {
	case onRejectedDLQ, "":
	case onRejectedRenumber:
		t.Renumber = true
	default:
		return nil, usageErr("--%s %q: want %s or %s", flagOnRejectedNumber, tc.onRejected, onRejectedDLQ, onRejectedRenumber)
	}
	if tc.maxSkew == 0 {
		return nil, usageErr("--%s 0 would reject every number issued this millisecond: give a bound (default %s) or a negative value to turn the check off", flagMaxSkew, pipeline.DefaultMaxSkew)
	}
	for _, f := range []struct {
		name, list string
		dst        *[]int64
	}{{flagAllowedServers, tc.allowedServers, &t.Servers}, {flagAllowedWorkers, tc.allowedWorkers, &t.Workers}} {
		if strings.TrimSpace(f.list) == "" {
			continue // unset or empty: any ID is allowed
		}
		ids, err := parseIDList(f.list)
		if err != nil {
			return nil, usageErr("--%s: %w", f.name, err)
		}
		*f.dst = ids
	}
	return pipeline.TrustNumbers(t), nil
}

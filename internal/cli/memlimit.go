package cli

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/urfave/cli/v2"
)

// flagMemoryLimit is the Go runtime's soft memory limit of a long-running
// command.
const (
	flagMemoryLimit    = "memory-limit"
	defaultMemoryLimit = "90%"
)

func (o *opsConfig) memoryLimitFlag() cli.Flag {
	return stringFlag(flagMemoryLimit, &o.memoryLimit, defaultMemoryLimit,
		"the Go runtime's soft memory limit, near which the garbage collector works harder instead of growing the heap: a size (256MiB, 2GiB), "+
			"a percentage of the container's (cgroup's) memory limit (none without one), or off; GOMEMLIMIT in the environment wins")
}

// applyMemoryLimit sets the soft memory limit --memory-limit asks for and
// logs it. cgroup is the container's memory limit (memlimit.FromCgroup);
// it returns memlimit.ErrNoLimit where there is none.
func (o *opsConfig) applyMemoryLimit(log *slog.Logger, cgroup memlimit.Provider) error {
	spec := strings.TrimSpace(o.memoryLimit)
	if env := os.Getenv("GOMEMLIMIT"); env != "" {
		log.Info("soft memory limit from GOMEMLIMIT; --"+flagMemoryLimit+" is not used", "GOMEMLIMIT", env)
		return nil
	}
	switch {
	case spec == "off":
		return nil
	case strings.HasSuffix(spec, "%"):
		pct, err := strconv.ParseFloat(strings.TrimSuffix(spec, "%"), 64)
		if err != nil || pct <= 0 || pct > 100 {
			return usageErr("--%s %q: want a percentage in (0%%, 100%%]", flagMemoryLimit, spec)
		}
		total, err := cgroup()
		if errors.Is(err, memlimit.ErrNoLimit) {
			log.Debug("no container memory limit: no soft memory limit", "memory_limit", spec)
			return nil
		}
		if err != nil {
			return fmt.Errorf("--%s %s: reading the container's memory limit: %w (pass a size, or off)", flagMemoryLimit, spec, err)
		}
		limit := int64(math.Min(float64(total)*pct/100, math.MaxInt64))
		debug.SetMemoryLimit(limit)
		log.Info("soft memory limit", "bytes", limit, "of_container_limit", total, "memory_limit", spec)
		return nil
	}
	limit, err := parseBytes(spec)
	if err != nil {
		return usageErr("--%s %q: %v", flagMemoryLimit, spec, err)
	}
	debug.SetMemoryLimit(limit)
	log.Info("soft memory limit", "bytes", limit, "memory_limit", spec)
	return nil
}

// parseBytes reads a size as GOMEMLIMIT writes it: a number of bytes, or
// one with a B, KiB, MiB, GiB or TiB suffix.
func parseBytes(s string) (int64, error) {
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"B", 1}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n <= 0 || n > math.MaxInt64/mult {
		return 0, errors.New("want a size such as 256MiB or 2GiB, a percentage such as 90%, or off")
	}
	return n * mult, nil
}

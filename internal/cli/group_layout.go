package cli

import (
	"fmt"
	"strconv"
	"time"

	"github.com/flakestream/flakestream/idgen"
	"github.com/urfave/cli/v2"
)

// The layout group: the bit widths and the epoch of the numbers.
const (
	flagEpoch        = "epoch"
	flagTimeBits     = "time-bits"
	flagServerBits   = "server-bits"
	flagWorkerBits   = "worker-bits"
	flagSequenceBits = "sequence-bits"
)

type layoutConfig struct {
	epoch                                     string
	timeBits, serverBits, workerBits, seqBits int
}

func (l *layoutConfig) flags() []cli.Flag {
	return []cli.Flag{
		stringFlag(flagEpoch, &l.epoch, idgen.DefaultEpoch.Format(time.RFC3339), "the layout's epoch, RFC 3339 or Unix milliseconds"),
		intFlag(flagTimeBits, &l.timeBits, idgen.DefaultTimeBits, "width of the time field (milliseconds since the epoch)"),
		intFlag(flagServerBits, &l.serverBits, idgen.DefaultServerBits, "width of the server field (may be 0)"),
		intFlag(flagWorkerBits, &l.workerBits, idgen.DefaultWorkerBits, "width of the worker (business line) field (may be 0)"),
		intFlag(flagSequenceBits, &l.seqBits, idgen.DefaultSequenceBits, "width of the per-millisecond sequence"),
	}
}

// layout builds and validates the layout the flags describe.
func (l *layoutConfig) layout() (idgen.Layout, error) {
	epoch, err := parseEpoch(l.epoch)
	if err != nil {
		return idgen.Layout{}, err
	}
	out, err := idgen.NewLayout(epoch, l.timeBits, l.serverBits, l.workerBits, l.seqBits)
	if err != nil {
		return idgen.Layout{}, fmt.Errorf("layout: %w", err)
	}
	return out, nil
}

func parseEpoch(s string) (time.Time, error) {
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.UnixMilli(ms), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("--%s %q is neither RFC 3339 (2021-11-12T00:00:00+08:00) nor Unix milliseconds", flagEpoch, s)
	}
	return t, nil
}

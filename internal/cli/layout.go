package cli

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/flakestream/flakestream/idgen"
	"github.com/urfave/cli/v2"
)

// layoutOutput is what the commands that need only a layout and print
// text or JSON (decode, layout) read from their flags.
type layoutOutput struct {
	json   bool
	layout layoutConfig
}

func (o *layoutOutput) flags(jsonUsage string) []cli.Flag {
	return concat([]cli.Flag{jsonFlag(&o.json, jsonUsage)}, o.layout.flags())
}

// layoutCmdConfig is what `flakestream layout` reads from its flags.
type layoutCmdConfig struct{ layoutOutput }

func layoutCommand() *cli.Command {
	cfg := &layoutCmdConfig{}
	return configured(&cli.Command{
		Name:   "layout",
		Usage:  "print the layout's widths, limits, capacity and dates",
		Flags:  cfg.flags("print one JSON object"),
		Action: cfg.run,
	})
}

func (cfg *layoutCmdConfig) run(c *cli.Context) error {
	l, err := cfg.layout.layout()
	if err != nil {
		return err
	}
	info := layoutInfo{
		Layout: l.String(), TimeBits: l.TimeBits, ServerBits: l.ServerBits, WorkerBits: l.WorkerBits, SequenceBits: l.SequenceBits,
		MaxServer: l.MaxServer(), MaxWorker: l.MaxWorker(), MaxSequence: l.MaxSequence(), MaxElapsedMs: l.MaxTime(),
		PerMs: l.PerMillisecond(), PerSecond: l.PerSecond(),
		Start: l.Start().Format(msRFC3339), End: l.End().Format(msRFC3339),
	}
	if cfg.json {
		b, _ := json.Marshal(info)
		_, err := fmt.Fprintf(c.App.Writer, "%s\n", b)
		return err
	}
	tw := tabwriter.NewWriter(c.App.Writer, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "layout\t%s\t(time/server/worker/sequence bits @ epoch)\n", info.Layout)
	fmt.Fprintf(tw, "time bits\t%d\tmilliseconds since the epoch, up to %d\n", l.TimeBits, l.MaxTime())
	fmt.Fprintf(tw, "server bits\t%d\tserver IDs 0..%d\n", l.ServerBits, l.MaxServer())
	fmt.Fprintf(tw, "worker bits\t%d\tworker IDs 0..%d\n", l.WorkerBits, l.MaxWorker())
	fmt.Fprintf(tw, "sequence bits\t%d\tsequence 0..%d\n", l.SequenceBits, l.MaxSequence())
	fmt.Fprintf(tw, "capacity\t%d/ms\t%d/s per (server, worker) pair\n", l.PerMillisecond(), l.PerSecond())
	fmt.Fprintf(tw, "start\t%s\tthe epoch\n", info.Start)
	fmt.Fprintf(tw, "end\t%s\tin %s; past it nothing is issued\n", info.End, untilEnd(l))
	return tw.Flush()
}

const msRFC3339 = "2006-01-02T15:04:05.000Z07:00"

type layoutInfo struct {
	Layout       string `json:"layout"`
	TimeBits     int    `json:"time_bits"`
	ServerBits   int    `json:"server_bits"`
	WorkerBits   int    `json:"worker_bits"`
	SequenceBits int    `json:"sequence_bits"`
	MaxServer    int64  `json:"max_server"`
	MaxWorker    int64  `json:"max_worker"`
	MaxSequence  int64  `json:"max_sequence"`
	MaxElapsedMs int64  `json:"max_elapsed_ms"`
	PerMs        int64  `json:"per_ms"`
	PerSecond    int64  `json:"per_second"`
	Start        string `json:"start"`
	End          string `json:"end"`
}

func untilEnd(l idgen.Layout) string {
	d := time.Until(l.End())
	if d < 0 {
		return "the past"
	}
	return fmt.Sprintf("%.1f years", d.Hours()/24/365.25)
}

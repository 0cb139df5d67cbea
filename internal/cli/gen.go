package cli

import (
	"bufio"
	"fmt"
	"strconv"
	"time"

	"github.com/flakestream/flakestream/idgen"
	"github.com/urfave/cli/v2"
)

// flagCount is gen's --count.
const flagCount = "count"

// genConfig is what `flakestream gen` reads from its flags.
type genConfig struct {
	count     int64
	sequencer string
	identity  identityConfig
	layout    layoutConfig
	redis     redisConfig
}

func genCommand() *cli.Command {
	cfg := &genConfig{}
	return configured(&cli.Command{
		Name:      "gen",
		Usage:     "print new numbers, one per line",
		ArgsUsage: " ",
		Flags: concat(
			[]cli.Flag{
				int64Flag(flagCount, &cfg.count, 1, "how many numbers to print"),
				sequencerFlag(&cfg.sequencer),
			},
			cfg.identity.flags(), cfg.layout.flags(), cfg.redis.flags()),
		Action: cfg.run,
	})
}

func (cfg *genConfig) run(c *cli.Context) error {
	n := cfg.count
	if n < 1 {
		return usageErr("--%s %d: want at least 1", flagCount, n)
	}
	l, err := cfg.layout.layout()
	if err != nil {
		return err
	}
	// Ride through a Redis failover: ask again for up to 30s, saying so
	// once on stderr.
	var failing bool
	g, closeSeq, err := cfg.redis.generator(cfg.sequencer, l, cfg.identity.server, cfg.identity.worker, nil, func(s idgen.Sequencer) idgen.Sequencer {
		return idgen.Patient(s, idgen.DefaultGiveUp, func(err error, _ time.Duration) {
			if !failing {
				failing = true
				fmt.Fprintf(c.App.ErrWriter, "flakestream gen: %v; retrying for up to %s\n", err, idgen.DefaultGiveUp)
			}
		})
	})
	if err != nil {
		return err
	}
	defer closeSeq()
	w := bufio.NewWriterSize(c.App.Writer, 64<<10)
	ids := make([]int64, 0, 8192)
	line := make([]byte, 0, 24)
	for done := int64(0); done < n; done += int64(len(ids)) {
		if ids, err = g.AppendN(c.Context, ids[:0], int(min(n-done, 8192))); err != nil {
			w.Flush()
			return fmt.Errorf("gen: after %d numbers: %w", done, err)
		}
		for _, id := range ids {
			line = append(strconv.AppendInt(line[:0], id, 10), '\n')
			if _, err := w.Write(line); err != nil {
				return err
			}
		}
	}
	return w.Flush()
}

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/idgen"
	"github.com/urfave/cli/v2"
)

func genCommand() *cli.Command {
	return configured(&cli.Command{
		Name:      "gen",
		Usage:     "print new numbers, one per line",
		ArgsUsage: " ",
		Flags: concat(
			[]cli.Flag{
				int64Flag("count", 1, "how many numbers to print"),
				stringFlag("sequencer", "redis", "redis (any number of processes) or memory (this process only, for trying things out)"),
			},
			identityFlags(false), layoutFlags(), redisFlags()),
		Action: func(c *cli.Context) error {
			n := c.Int64("count")
			if n < 1 {
				return &exitError{code: 2, err: fmt.Errorf("--count %d: want at least 1", n)}
			}
			server, worker, err := identityFrom(c, false)
			if err != nil {
				return err
			}
			// Ride through a Redis failover: ask again for up to 30s.
			var failing bool
			g, closeSeq, err := generatorFrom(c, c.String("sequencer"), server, worker, nil, func(s idgen.Sequencer) idgen.Sequencer {
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
		},
	})
}

func decodeCommand() *cli.Command {
	return configured(&cli.Command{
		Name:      "decode",
		Usage:     "decode numbers into time, server, worker and sequence (reads standard input when no ID is given)",
		ArgsUsage: "[ID...]",
		Flags:     concat([]cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print one JSON object per line"}}, layoutFlags()),
		Action: func(c *cli.Context) error {
			l, err := layoutFrom(c)
			if err != nil {
				return err
			}
			ids := c.Args().Slice()
			next := func() (string, bool) {
				if len(ids) == 0 {
					return "", false
				}
				s := ids[0]
				ids = ids[1:]
				return s, true
			}
			if len(ids) == 0 {
				sc := bufio.NewScanner(c.App.Reader)
				sc.Split(bufio.ScanWords)
				next = func() (string, bool) {
					if !sc.Scan() {
						return "", false
					}
					return sc.Text(), true
				}
			}
			return decodeAll(c.App.Writer, c.App.ErrWriter, l, next, c.Bool("json"))
		},
	})
}

// decodeAll decodes every ID next yields. A bad ID is reported on errw and
// the rest are still decoded; the command then fails with exit code 1.
func decodeAll(w, errw io.Writer, l idgen.Layout, next func() (string, bool), asJSON bool) error {
	out := bufio.NewWriter(w)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	if !asJSON {
		fmt.Fprintln(tw, "ID\tTIME (UTC)\tELAPSED_MS\tSERVER\tWORKER\tSEQUENCE")
	}
	bad, total := 0, 0
	var buf []byte
	for s, ok := next(); ok; s, ok = next() {
		total++
		id, err := idgen.ParseID(s)
		var p idgen.Parts
		if err == nil {
			p, err = l.Decompose(id)
		}
		if err != nil {
			bad++
			if asJSON {
				out.Flush()
			} else {
				tw.Flush()
			}
			fmt.Fprintf(errw, "flakestream: decode %q: %v\n", s, strings.TrimPrefix(err.Error(), "idgen: "))
			continue
		}
		if asJSON {
			buf = append(decoded(p).AppendJSON(buf[:0]), '\n')
			out.Write(buf)
			continue
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%d\t%d\n", p.ID, p.Time.Format("2006-01-02T15:04:05.000Z07:00"), p.ElapsedMs, p.Server, p.Worker, p.Sequence)
	}
	tw.Flush()
	if err := out.Flush(); err != nil {
		return err
	}
	if bad > 0 {
		return &exitError{code: 1, err: fmt.Errorf("decode: %d of %d IDs are not valid numbers for layout %s", bad, total, l)}
	}
	return nil
}

func decoded(p idgen.Parts) codec.Decoded {
	return codec.Decoded{ID: p.ID, UnixMs: p.UnixMs, ElapsedMs: p.ElapsedMs, Server: p.Server, Worker: p.Worker, Sequence: p.Sequence, Valid: true}
}

func layoutCommand() *cli.Command {
	return configured(&cli.Command{
		Name:  "layout",
		Usage: "print the layout's widths, limits, capacity and dates",
		Flags: concat([]cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print one JSON object"}}, layoutFlags()),
		Action: func(c *cli.Context) error {
			l, err := layoutFrom(c)
			if err != nil {
				return err
			}
			info := layoutInfo{
				Layout: l.String(), TimeBits: l.TimeBits, ServerBits: l.ServerBits, WorkerBits: l.WorkerBits, SequenceBits: l.SequenceBits,
				MaxServer: l.MaxServer(), MaxWorker: l.MaxWorker(), MaxSequence: l.MaxSequence(), MaxElapsedMs: l.MaxTime(),
				PerMs: l.PerMillisecond(), PerSecond: l.PerSecond(),
				Start: l.Start().Format(msRFC3339), End: l.End().Format(msRFC3339),
			}
			if c.Bool("json") {
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
		},
	})
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

func concat(groups ...[]cli.Flag) []cli.Flag {
	var out []cli.Flag
	for _, g := range groups {
		out = append(out, g...)
	}
	return out
}

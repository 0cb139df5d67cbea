package cli

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/idgen"
	"github.com/urfave/cli/v2"
)

// decodeConfig is what `flakestream decode` reads from its flags.
type decodeConfig struct{ layoutOutput }

func decodeCommand() *cli.Command {
	cfg := &decodeConfig{}
	return configured(&cli.Command{
		Name:      "decode",
		Usage:     "decode numbers into time, server, worker and sequence (reads standard input when no ID is given)",
		ArgsUsage: "[ID...]",
		Flags:     cfg.flags("print one JSON object per line"),
		Action:    cfg.run,
	})
}

func (cfg *decodeConfig) run(c *cli.Context) error {
	l, err := cfg.layout.layout()
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
	return decodeAll(c.App.Writer, c.App.ErrWriter, l, next, cfg.json)
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
		fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%d\t%d\n", p.ID, p.Time.Format(msRFC3339), p.ElapsedMs, p.Server, p.Worker, p.Sequence)
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

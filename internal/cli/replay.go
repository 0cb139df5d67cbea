package cli

import (
	"cmp"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/flakestream/flakestream/idgen"
	"github.com/flakestream/flakestream/pipeline"
	"github.com/flakestream/flakestream/replay"
	"github.com/redis/go-redis/v9"
	"github.com/urfave/cli/v2"
)

// The replay's own flags.
const (
	flagFrom          = "from"
	flagTo            = "to"
	flagReplayID      = "replay-id"
	flagProgressEvery = "progress-every"
	flagAllPartitions = "all-partitions"
	flagDryRun        = "dry-run"
)

// defaultProgressEvery is how often a replay logs its progress when
// standard error is not a terminal.
const defaultProgressEvery = 5 * time.Second

// replayConfig is what `flakestream replay` reads from its flags.
type replayConfig struct {
	numberingConfig
	from, to      string
	allPartitions bool
	dryRun        bool
	replayID      string
	progressEvery time.Duration
}

func replayCommand() *cli.Command {
	cfg := &replayConfig{numberingConfig: numberingConfig{identity: identityConfig{required: true}}}
	return configured(&cli.Command{
		Name:  "replay",
		Usage: "number a bounded range of a topic into another, exactly once, resumable",
		Flags: concat(
			[]cli.Flag{replayInputTopicFlag(&cfg.consume.inputTopic)},
			cfg.consume.outputFlags(),
			rangeFlags(&cfg.from, &cfg.to, "the high watermarks when the replay first starts"),
			[]cli.Flag{
				allPartitionsFlag(&cfg.allPartitions),
				boolFlag(flagDryRun, &cfg.dryRun, "print each partition's resolved range and record count, and exit without producing"),
				stringFlag(flagReplayID, &cfg.replayID, "", "name of the replay's consumer group and transactional ID, flakestream-replay-<id> (default: derived from topics and bounds, so the same command resumes)"),
			},
			cfg.consume.loopFlags(false),
			[]cli.Flag{
				progressEveryFlag(&cfg.progressEvery),
				sequencerFlag(&cfg.sequencer),
			},
			cfg.identity.flags(), cfg.layout.flags(), cfg.redis.flags(), cfg.codec.flags(), cfg.schema.flags(), cfg.idempotency.flags(), cfg.trust.flags(),
			cfg.kafka.flags(), cfg.ops.logFlags()),
		Action: cfg.run,
	})
}

func (cfg *replayConfig) run(c *cli.Context) error {
	// Log lines go through the progress display, so that they are written
	// above a terminal's bar, never into it.
	prog := newProgress(c.App.ErrWriter, "replay", cfg.progressEvery)
	log, err := cfg.ops.logger(prog)
	if err != nil {
		return err
	}
	prog.log = log
	in, out := cfg.consume.inputTopic, cfg.consume.outputTopic
	if in == "" || out == "" {
		return usageErr("--%s and --%s are required", flagInputTopic, flagOutputTopic)
	}
	from, err := replay.ParseBound(cfg.from)
	if err != nil {
		return usageErr("--%s: %w", flagFrom, err)
	}
	to, err := replay.ParseBound(cfg.to)
	if err != nil {
		return usageErr("--%s: %w", flagTo, err)
	}
	if err := cfg.identity.check(c); err != nil {
		return err
	}
	l, err := cfg.layout.layout()
	if err != nil {
		return err
	}
	// Redis holds the replay's range (and the keys), whatever the
	// sequencer; the sequencer shares the client.
	rc, err := cfg.redis.client()
	if err != nil {
		return err
	}
	defer rc.Close()
	g, closeSeq, err := cfg.redis.generator(cfg.sequencer, l, cfg.identity.server, cfg.identity.worker, rc, nil)
	if err != nil {
		return err
	}
	defer closeSeq()
	rcfg, err := cfg.replayOptions(g, rc, from, to, log)
	if err != nil {
		return err
	}
	if err := cfg.kafka.reach(c.Context, log); err != nil || c.Context.Err() != nil {
		return cmp.Or(err, ended(c, nil, prog, rcfg.ID))
	}
	if cfg.dryRun {
		plan, err := replay.Resolve(c.Context, rcfg)
		if err != nil {
			return fmt.Errorf("replay --%s: %w", flagDryRun, err)
		}
		printPlan(c.App.Writer, in, out, plan)
		return nil
	}
	rcfg.Progress = prog.update
	log.Info("replay", "input", in, "output", out, "from", from.String(), "to", to.String(), "group", replay.Group(rcfg.ID))
	ranges, err := replay.Run(c.Context, rcfg)
	err = ended(c, err, prog, rcfg.ID)
	// The bar is drawn complete only if the replay is; the error, if any,
	// comes after it.
	prog.finish(err == nil)
	if err != nil {
		return err
	}
	_, total := prog.counts()
	log.Info("replay complete", "partitions", len(ranges), "records", total)
	return nil
}

// ended is the error a replay that ended with err returns: exit 130 with
// how to resume when a signal stopped it, however it ended (what it
// committed stays, and the same command continues from there), else err.
func ended(c *cli.Context, err error, prog *progress, id string) error {
	if c.Context.Err() != nil {
		done, total := prog.counts()
		return &exitError{code: 130, err: fmt.Errorf("replay interrupted at %d of %d records; run the same command again to resume (replay %s)", done, total, replay.Group(id))}
	}
	if err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	return nil
}

// replayOptions turns replay's flags into the replay's configuration: the
// one place the CLI builds it. Progress is left to the caller.
func (cfg *replayConfig) replayOptions(g *idgen.Generator, rc redis.UniversalClient, from, to replay.Bound, log *slog.Logger) (replay.Config, error) {
	cc := &cfg.consume
	idem, err := cfg.idempotency.idempotency(rc, &cfg.redis)
	if err != nil {
		return replay.Config{}, err
	}
	cd, err := cfg.codec.codec(g.Layout())
	if err != nil {
		return replay.Config{}, err
	}
	vf, err := cfg.codec.valueFormat(&cfg.schema, cd, g.Layout(), cc.outputTopic)
	if err != nil {
		return replay.Config{}, err
	}
	s, err := cc.settings(&cfg.kafka, []string{cc.inputTopic}, log, nil)
	if err != nil {
		return replay.Config{}, err
	}
	dlq := cc.dlqTopic
	if dlq == "" {
		dlq = cc.outputTopic + ".dlq"
	}
	trust, err := cfg.trust.trust(g.Layout())
	if err != nil {
		return replay.Config{}, err
	}
	worker := []pipeline.Opt{trust, pipeline.Numbers(g), pipeline.Codec(cd), pipeline.Format(vf), pipeline.DLQTopic(dlq)}
	if idem != nil {
		worker = append(worker, pipeline.WithIdempotency(idem))
	}
	if cc.createTopics {
		worker = append(worker, pipeline.CreateTopics())
	}
	rcfg := replay.Config{
		Loop: s, Input: cc.inputTopic, Output: cc.outputTopic, From: from, To: to, AllPartitions: cfg.allPartitions, ID: cfg.replayID,
		Redis: rc, RedisPrefix: cfg.redis.prefix, Worker: worker,
	}
	if rcfg.ID == "" {
		rcfg.ID = replay.ID(rcfg)
	}
	return rcfg, nil
}

// allPartitionsFlag is --all-partitions, for replay and verify.
func allPartitionsFlag(dst *bool) cli.Flag {
	return boolFlag(flagAllPartitions, dst, "with partition:offset bounds, cover every partition (one not listed runs from its start or to its end), not only the listed ones")
}

// printPlan writes a dry run's plan: a line per partition, the total, and
// the partitions left out.
func printPlan(w io.Writer, in, out string, p replay.Plan) {
	fmt.Fprintf(w, "replay %s -> %s as %s (dry run: nothing is produced)\n", in, out, p.Group)
	if p.Stored {
		fmt.Fprintf(w, "the ranges an earlier run of this replay resolved and kept:\n")
	}
	for _, pp := range p.Partitions {
		line := fmt.Sprintf("partition %d: offsets %d to %d: %d records", pp.Partition, pp.From, pp.To, pp.Offsets())
		if pp.Done > 0 {
			line += fmt.Sprintf(", %d already done", pp.Done)
		}
		fmt.Fprintln(w, line)
	}
	offsets, done := p.Total()
	fmt.Fprintf(w, "total: %d partitions, %d records", len(p.Partitions), offsets)
	if done > 0 {
		fmt.Fprintf(w, ", %d already done", done)
	}
	fmt.Fprintln(w)
	if len(p.Left) > 0 {
		fmt.Fprintf(w, "not replayed: partitions %s (not listed in --%s or --%s; --%s replays them)\n", joinInts(p.Left), flagFrom, flagTo, flagAllPartitions)
	}
}

func joinInts(ps []int32) string {
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = strconv.Itoa(int(p))
	}
	return strings.Join(parts, ", ")
}

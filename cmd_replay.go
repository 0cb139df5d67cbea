package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/flakestream/flakestream/idgen"
	"github.com/flakestream/flakestream/pipeline"
	"github.com/redis/go-redis/v9"
	"github.com/schollz/progressbar/v3"
	"github.com/urfave/cli/v2"
	"golang.org/x/term"
)

func idempotencyFlags() []cli.Flag {
	return []cli.Flag{
		stringFlag("idempotency-key", "", "give records with the same key the same number: key (the Kafka record key) or field:<name> (a top-level JSON field); off by default"),
		durationFlag("idempotency-ttl", idgen.DefaultKeyTTL, "how long a key keeps its number"),
		boolFlag("idempotency-optional", "number a record without the key like any other, instead of dead-lettering it as missing_key"),
		stringFlag("on-repeat", "emit", "a record whose key already has a number: emit it with that number and flakestream-repeat: true, or drop it (counted)"),
	}
}

// idempotencyFrom returns the idempotency the flags ask for, or nil.
func idempotencyFrom(c *cli.Context, rc redis.Cmdable) (*pipeline.Idempotency, error) {
	spec := c.String("idempotency-key")
	if spec == "" {
		return nil, nil
	}
	field, err := pipeline.ParseIdempotencyKey(spec)
	if err != nil {
		return nil, &exitError{code: 2, err: err}
	}
	drop, err := pipeline.ParseOnRepeat(c.String("on-repeat"))
	if err != nil {
		return nil, &exitError{code: 2, err: err}
	}
	store, err := idgen.NewKeyStore(rc, c.String("redis-prefix"), c.Duration("idempotency-ttl"))
	if err != nil {
		return nil, &exitError{code: 2, err: err}
	}
	d, err := durabilityFrom(c)
	if err != nil {
		return nil, err
	}
	if err := store.Durable(d); err != nil {
		return nil, &exitError{code: 2, err: err}
	}
	return &pipeline.Idempotency{Store: store, Field: field, Optional: c.Bool("idempotency-optional"), Drop: drop}, nil
}

func replayCommand() *cli.Command {
	return configured(&cli.Command{
		Name:  "replay",
		Usage: "number a bounded range of a topic into another, exactly once, resumable",
		Flags: concat([]cli.Flag{
			stringFlag("input-topic", "", "topic to replay (required)"),
			stringFlag("output-topic", "", "topic to write to (required)"),
			stringFlag("dlq-topic", "", "dead-letter topic (default \"<output topic>.dlq\")"),
			stringFlag("from", "start", "start of the range: start, an RFC 3339 time, or partition:offset,..."),
			stringFlag("to", "end", "end of the range (exclusive): end (the high watermarks when the replay first starts), an RFC 3339 time, or partition:offset,..."),
			stringFlag("replay-id", "", "name of the replay's consumer group and transactional ID, flakestream-replay-<id> (default: derived from topics and bounds, so the same command resumes)"),
			boolFlag("create-topics", "create a missing output or DLQ topic"),
			intFlag("max-poll-records", 10000, "records per transaction at most"),
			durationFlag("txn-timeout", 10*time.Second, "transaction timeout"),
			durationFlag("progress-every", 5*time.Second, "how often to log progress when standard error is not a terminal"),
			stringFlag("sequencer", "redis", "redis, or memory (one process only)"),
		}, identityFlags(true), layoutFlags(), redisFlags(), codecFlags(), idempotencyFlags(), kafkaFlags(), logFlags()),
		Action: func(c *cli.Context) error {
			log, err := loggerFrom(c)
			if err != nil {
				return err
			}
			in, out := c.String("input-topic"), c.String("output-topic")
			if in == "" || out == "" {
				return &exitError{code: 2, err: fmt.Errorf("--input-topic and --output-topic are required")}
			}
			from, err := pipeline.ParseBound(c.String("from"))
			if err != nil {
				return &exitError{code: 2, err: fmt.Errorf("--from: %w", err)}
			}
			to, err := pipeline.ParseBound(c.String("to"))
			if err != nil {
				return &exitError{code: 2, err: fmt.Errorf("--to: %w", err)}
			}
			server, worker, err := identityFrom(c, true)
			if err != nil {
				return err
			}
			// Redis holds the replay's range (and the keys), whatever the
			// sequencer; the sequencer shares the client.
			rc, _, err := redisFrom(c)
			if err != nil {
				return err
			}
			defer rc.Close()
			g, closeSeq, err := generatorFrom(c, c.String("sequencer"), server, worker, rc, nil)
			if err != nil {
				return err
			}
			defer closeSeq()
			idem, err := idempotencyFrom(c, rc)
			if err != nil {
				return err
			}
			cd, err := codecFrom(c, g.Layout())
			if err != nil {
				return err
			}
			kopts, err := kafkaOptsFrom(c)
			if err != nil {
				return err
			}
			dlq := c.String("dlq-topic")
			if dlq == "" {
				dlq = out + ".dlq"
			}
			worker2 := []pipeline.Opt{pipeline.Numbers(g), pipeline.Codec(cd), pipeline.DLQTopic(dlq), pipeline.Logger(log),
				pipeline.MaxPollRecords(c.Int("max-poll-records")), pipeline.TransactionTimeout(c.Duration("txn-timeout"))}
			if idem != nil {
				worker2 = append(worker2, pipeline.WithIdempotency(idem))
			}
			if c.Bool("create-topics") {
				worker2 = append(worker2, pipeline.CreateTopics())
			}
			id := c.String("replay-id")
			if id == "" {
				id = pipeline.ReplayID(in, out, from, to)
			}
			log.Info("replay", "input", in, "output", out, "from", from.String(), "to", to.String(), "group", "flakestream-replay-"+id)
			prog := newProgress(c.App.ErrWriter, log, c.Duration("progress-every"))
			ranges, err := pipeline.Replay(c.Context, pipeline.ReplayConfig{
				Brokers: c.StringSlice("brokers"), KafkaOpts: kopts, Input: in, Output: out, From: from, To: to, ID: id,
				Redis: rc, RedisPrefix: c.String("redis-prefix"), Worker: worker2, Progress: prog.update,
			})
			prog.finish()
			if err != nil {
				return fmt.Errorf("replay: %w", err)
			}
			if c.Context.Err() != nil {
				return &exitError{code: 130, err: fmt.Errorf("replay interrupted; run the same command again to resume")}
			}
			log.Info("replay complete", "partitions", len(ranges), "records", prog.total)
			return nil
		},
	})
}

// progress shows a replay's progress: a bar on a terminal, otherwise a log
// line every few seconds, with records done out of the total, rate and ETA.
type progress struct {
	mu          sync.Mutex
	w           io.Writer
	bar         *progressbar.ProgressBar
	log         *slog.Logger
	every       time.Duration
	start, last time.Time
	first       int64
	done, total int64
}

func newProgress(w io.Writer, log *slog.Logger, every time.Duration) *progress {
	p := &progress{w: w, log: log, every: every, start: time.Now(), first: -1}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.bar = progressbar.NewOptions64(-1, progressbar.OptionSetWriter(w), progressbar.OptionSetDescription("replay"),
			progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionSetItsString("records"),
			progressbar.OptionSetPredictTime(true), progressbar.OptionThrottle(200*time.Millisecond), progressbar.OptionFullWidth())
	}
	return p
}

func (p *progress) update(done, total int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.first < 0 {
		p.first = done // what earlier runs did is not this run's rate
	}
	p.done, p.total = done, total
	if p.bar != nil {
		p.bar.ChangeMax64(total)
		_ = p.bar.Set64(done)
		return
	}
	if now := time.Now(); now.Sub(p.last) >= p.every || done == total {
		p.last = now
		p.log.Info("replay progress", p.figures()...)
	}
}

// figures are the progress as log attributes: done, total, percent, rate
// and ETA.
func (p *progress) figures() []any {
	elapsed := time.Since(p.start).Seconds()
	rate := float64(p.done-p.first) / max(elapsed, 1e-3)
	eta := "unknown"
	if rate > 0 {
		eta = (time.Duration(float64(p.total-p.done)/rate) * time.Second).Round(time.Second).String()
	}
	pct := 100.0
	if p.total > 0 {
		pct = 100 * float64(p.done) / float64(p.total)
	}
	return []any{"done", p.done, "total", p.total, "percent", fmt.Sprintf("%.1f", pct), "records_per_sec", int64(rate), "eta", eta}
}

func (p *progress) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar != nil {
		_ = p.bar.Finish()
		fmt.Fprintln(p.w)
	}
}

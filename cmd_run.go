package main

import (
	"fmt"
	"os"
	"time"

	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/idgen"
	"github.com/flakestream/flakestream/pipeline"
	"github.com/redis/go-redis/v9"
	"github.com/urfave/cli/v2"
	"github.com/urfave/cli/v2/altsrc"
)

func codecFlags() []cli.Flag {
	return []cli.Flag{
		stringFlag("number-field", codec.DefaultField, "top-level JSON field the number is written to"),
		stringFlag("number-format", "string", "string writes \"order_no\":\"123\" (safe for JavaScript), number writes \"order_no\":123"),
		intFlag("max-record-bytes", codec.DefaultMaxBytes, "larger values are dead-lettered as too_large without being read"),
	}
}

// codecFrom builds the codec the flags describe. A number an event already
// carries must decode under the layout to pass through.
func codecFrom(c *cli.Context, l idgen.Layout) (*codec.Codec, error) {
	f, err := codec.ParseNumberFormat(c.String("number-format"))
	if err != nil {
		return nil, &exitError{code: 2, err: fmt.Errorf("--number-format: %w", err)}
	}
	cd, err := codec.New(codec.Config{
		Field: c.String("number-field"), Format: f, MaxBytes: c.Int("max-record-bytes"),
		Valid: func(id int64) error { _, err := l.Decompose(id); return err },
	})
	if err != nil {
		return nil, &exitError{code: 2, err: err}
	}
	return cd, nil
}

func workerFlags() []cli.Flag {
	host, _ := os.Hostname()
	return []cli.Flag{
		stringSliceFlag("input-topic", nil, "topic of unnumbered order events (repeat for several; required)"),
		stringFlag("output-topic", "", "topic the numbered events go to (required)"),
		stringFlag("dlq-topic", "", "dead-letter topic (default \"<first input topic>.dlq\")"),
		stringFlag("group", "flakestream", "consumer group"),
		stringFlag("instance-id", host, "this instance's stable name (default: the host name, unique per pod); the transactional ID is flakestream-<group>-<instance-id>"),
		stringFlag("transactional-id", "", "transactional ID, overriding the one derived from --instance-id"),
		stringFlag("start-offset", "earliest", "where a group with no committed offsets starts: earliest (no order skipped) or latest"),
		boolFlag("create-topics", "create a missing output or DLQ topic with the input's partition count instead of refusing to start"),
		intFlag("max-poll-records", 10000, "records per transaction at most"),
		intFlag("max-buffered-records", 100000, "records buffered for producing at most"),
		intFlag("fetch-max-bytes", 32<<20, "bytes per fetch response at most"),
		durationFlag("linger", 0, "producer linger (each transaction flushes at its end anyway)"),
		durationFlag("txn-timeout", 10*time.Second, "transaction timeout: how long readers wait behind an instance that died mid-transaction and never came back"),
		durationFlag("session-timeout", 10*time.Second, "group session timeout: how long the group waits for a dead member before handing its partitions on"),
		boolFlag("static-membership", "join as static member --instance-id (KIP-345): a restart under the same ID takes its partitions back without a rebalance; a member gone for good is removed only after --session-timeout"),
		durationFlag("shutdown-timeout", 15*time.Second, "bound on finishing the open transaction and leaving the group after a signal"),
		altsrc.NewBoolFlag(&cli.BoolFlag{Name: "orphan-guard", Value: true, EnvVars: envVars("orphan-guard"),
			Usage: "before the first produce of a session and after every aborted transaction, abort a transaction this producer ID left open at an older epoch on the output or DLQ partitions that the coordinator no longer tracks (needs ALTER on the cluster; see the README)"}),
		stringFlag("sequencer", "redis", "redis (any number of instances), or memory (one process only: not for production)"),
	}
}

func runCommand() *cli.Command {
	return configured(&cli.Command{
		Name:  "run",
		Usage: "number order events from the input topic(s) into the output topic, exactly once",
		Flags: concat(workerFlags(), identityFlags(true), layoutFlags(), redisFlags(), codecFlags(), idempotencyFlags(), kafkaFlags(), opsFlags(":9464")),
		Action: func(c *cli.Context) error {
			log, err := loggerFrom(c)
			if err != nil {
				return err
			}
			server, worker, err := identityFrom(c, true)
			if err != nil {
				return err
			}
			reg := newRegistry()
			// One Redis client for the sequencer and the idempotency keys.
			var rc *redis.Client
			if c.String("sequencer") == "redis" || c.String("idempotency-key") != "" {
				if rc, err = idgen.RedisClient(c.String("redis")); err != nil {
					return err
				}
				defer rc.Close()
			}
			g, closeSeq, err := generatorFrom(c, c.String("sequencer"), server, worker, rc, func(s idgen.Sequencer) idgen.Sequencer {
				return pipeline.NewTimedSequencer(s, reg)
			})
			if err != nil {
				return err
			}
			defer closeSeq()
			if c.String("sequencer") == "memory" {
				log.Warn("--sequencer memory: numbers are unique only within this one process; run more than one instance and they will collide")
			}
			pipeline.RegisterGenerator(reg, g)
			opts, err := workerOptsFrom(c, g)
			if err != nil {
				return err
			}
			opts = append(opts, pipeline.Logger(log), pipeline.Registerer(reg))
			if c.String("idempotency-key") != "" {
				idem, err := idempotencyFrom(c, rc)
				if err != nil {
					return err
				}
				opts = append(opts, pipeline.WithIdempotency(idem))
			}
			w, err := pipeline.NewWorker(opts...)
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			if addr := c.String("http-addr"); addr != "" {
				bound, err := pipeline.Serve(c.Context, addr, reg, w.Ready, nil, log)
				if err != nil {
					return fmt.Errorf("--http-addr %s: %w", addr, err)
				}
				log.Info("serving /metrics, /healthz, /readyz", "addr", bound.String())
			}
			l := g.Layout()
			log.Info("numbering", "layout", l.String(), "server_id", server, "worker_id", worker,
				"capacity_per_second", l.PerSecond(), "layout_end", l.End().Format(time.RFC3339))
			return w.Run(c.Context)
		},
	})
}

// workerOptsFrom turns the worker flags into pipeline options.
func workerOptsFrom(c *cli.Context, g *idgen.Generator) ([]pipeline.Opt, error) {
	inputs := c.StringSlice("input-topic")
	if len(inputs) == 0 || c.String("output-topic") == "" {
		return nil, &exitError{code: 2, err: fmt.Errorf("--input-topic and --output-topic are required")}
	}
	cd, err := codecFrom(c, g.Layout())
	if err != nil {
		return nil, err
	}
	kopts, err := kafkaOptsFrom(c)
	if err != nil {
		return nil, err
	}
	opts := []pipeline.Opt{
		pipeline.Brokers(c.StringSlice("brokers")...),
		pipeline.InputTopics(inputs...),
		pipeline.OutputTopic(c.String("output-topic")),
		pipeline.Group(c.String("group")),
		pipeline.InstanceID(c.String("instance-id")),
		pipeline.Numbers(g),
		pipeline.Codec(cd),
		pipeline.Start(pipeline.StartOffset(c.String("start-offset"))),
		pipeline.MaxPollRecords(c.Int("max-poll-records")),
		pipeline.MaxBufferedRecords(c.Int("max-buffered-records")),
		pipeline.FetchMaxBytes(int32(c.Int("fetch-max-bytes"))),
		pipeline.Linger(c.Duration("linger")),
		pipeline.TransactionTimeout(c.Duration("txn-timeout")),
		pipeline.ShutdownTimeout(c.Duration("shutdown-timeout")),
		pipeline.SessionTimeout(c.Duration("session-timeout")),
		pipeline.KafkaOpts(kopts...),
	}
	if c.Bool("static-membership") {
		opts = append(opts, pipeline.StaticMembership())
	}
	if d := c.String("dlq-topic"); d != "" {
		opts = append(opts, pipeline.DLQTopic(d))
	}
	if id := c.String("transactional-id"); id != "" {
		opts = append(opts, pipeline.TransactionalID(id))
	}
	if c.Bool("create-topics") {
		opts = append(opts, pipeline.CreateTopics())
	}
	opts = append(opts, pipeline.OrphanGuard(c.Bool("orphan-guard")))
	return opts, nil
}

package cli

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/flakestream/flakestream/eos"

	"github.com/flakestream/flakestream/idgen"
	"github.com/flakestream/flakestream/pipeline"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/urfave/cli/v2"
)

// numberingConfig holds the flag groups of every command that numbers
// orders from a topic: run, and replay, which is the worker over a range.
type numberingConfig struct {
	consume     consumeConfig
	identity    identityConfig
	layout      layoutConfig
	redis       redisConfig
	codec       codecConfig
	schema      schemaConfig
	idempotency idempotencyConfig
	trust       trustConfig
	kafka       kafkaConfig
	ops         opsConfig
	sequencer   string
}

// runConfig is what `flakestream run` reads from its flags.
type runConfig struct {
	numberingConfig
}

func runCommand() *cli.Command {
	cfg := &runConfig{numberingConfig{consume: consumeConfig{defaultGroup: pipeline.DefaultGroup}, identity: identityConfig{required: true}}}
	return configured(&cli.Command{
		Name:  "run",
		Usage: "number order events from the input topic(s) into the output topic, exactly once",
		Flags: concat(
			cfg.consume.inputTopicsFlag(), cfg.consume.outputFlags(), cfg.consume.memberFlags(),
			cfg.consume.loopFlags(true), cfg.consume.workerTuningFlags(),
			[]cli.Flag{sequencerFlag(&cfg.sequencer)},
			cfg.identity.flags(), cfg.layout.flags(), cfg.redis.flags(), cfg.codec.flags(), cfg.schema.flags(), cfg.idempotency.flags(),
			cfg.trust.flags(), cfg.kafka.flags(), cfg.ops.flags(defaultRunHTTPAddr, legacyRunPprofAddr)),
		Action: cfg.run,
	})
}

func (cfg *runConfig) run(c *cli.Context) error {
	log, err := cfg.ops.start(c.App.ErrWriter)
	if err != nil {
		return err
	}
	if err := cfg.identity.check(c); err != nil {
		return err
	}
	l, err := cfg.layout.layout()
	if err != nil {
		return err
	}
	reg := newRegistry()
	// One Redis client for the sequencer and the idempotency keys.
	var rc redis.UniversalClient
	if cfg.sequencer == sequencerRedis || cfg.idempotency.enabled() {
		if rc, err = cfg.redis.client(); err != nil {
			return err
		}
		defer rc.Close()
	}
	g, closeSeq, err := cfg.redis.generator(cfg.sequencer, l, cfg.identity.server, cfg.identity.worker, rc, func(s idgen.Sequencer) idgen.Sequencer {
		if rs, ok := s.(*idgen.RedisSequencer); ok {
			registerNotReplicated(reg, "reservation", rs.NotReplicated)
		}
		return pipeline.NewTimedSequencer(s, reg)
	})
	if err != nil {
		return err
	}
	defer closeSeq()
	if cfg.sequencer == sequencerMemory {
		log.Warn("--sequencer memory: numbers are unique only within this one process; run more than one instance and they will collide")
	}
	pipeline.RegisterGenerator(reg, g)
	idem, err := cfg.idempotency.idempotency(rc, &cfg.redis)
	if err != nil {
		return err
	}
	if idem != nil {
		registerNotReplicated(reg, "key_claim", idem.Store.NotReplicated)
	}
	opts, err := cfg.workerOptions(g, idem)
	if err != nil {
		return err
	}
	s, err := cfg.consume.settings(&cfg.kafka, cfg.consume.inputTopics.Value(), log, reg)
	if err != nil {
		return err
	}
	if err := checkWorker(s, opts, cfg.consume.lanes); err != nil {
		return err
	}
	var lanes atomic.Pointer[pipeline.Lanes]
	ready := func() error {
		if w := lanes.Load(); w != nil {
			return w.Ready()
		}
		return errStarting
	}
	if err := cfg.ops.serve(c.Context, reg, ready, nil, log, "/metrics, /healthz, /readyz"); err != nil {
		return err
	}
	if err := cfg.kafka.reach(c.Context, log); err != nil {
		return err
	}
	n, err := cfg.consume.laneCount(c.Context, s, log)
	if err != nil {
		return err
	}
	w, err := pipeline.NewLanes(n, s, opts...)
	if err != nil {
		return asUsage(err)
	}
	lanes.Store(w)
	log.Info("numbering", "lanes", n, "layout", l.String(), "server_id", cfg.identity.server, "worker_id", cfg.identity.worker,
		"capacity_per_second", l.PerSecond(), "layout_end", l.End().Format(time.RFC3339))
	return w.Run(c.Context)
}

// checkWorker checks the lanes and the worker's settings before the
// brokers are reached (the lane count may need them); the worker it builds
// is never run.
func checkWorker(s eos.Config, opts []pipeline.Opt, lanes string) error {
	if _, err := parseLanes(lanes); err != nil {
		return err
	}
	s.Registerer = nil
	if _, err := pipeline.NewWorker(s, opts...); err != nil {
		return asUsage(err)
	}
	return nil
}

// errStarting is /readyz's answer before the worker's lanes exist: the
// brokers are still being reached or the lanes counted.
var errStarting = errors.New("starting: reaching the brokers")

// workerOptions turns run's flags into the worker's own options (the
// loop's settings are consumeConfig.settings'): the one place the CLI
// builds them. idem is nil without an idempotency key.
func (cfg *runConfig) workerOptions(g *idgen.Generator, idem *pipeline.Idempotency) ([]pipeline.Opt, error) {
	cc := &cfg.consume
	inputs := cc.inputTopics.Value()
	if len(inputs) == 0 || cc.outputTopic == "" {
		return nil, usageErr("--%s and --%s are required", flagInputTopic, flagOutputTopic)
	}
	cd, err := cfg.codec.codec(g.Layout())
	if err != nil {
		return nil, err
	}
	vf, err := cfg.codec.valueFormat(&cfg.schema, cd, g.Layout(), cc.outputTopic)
	if err != nil {
		return nil, err
	}
	trust, err := cfg.trust.trust(g.Layout())
	if err != nil {
		return nil, err
	}
	opts := []pipeline.Opt{
		trust,
		pipeline.OutputTopic(cc.outputTopic),
		pipeline.Numbers(g),
		pipeline.Codec(cd),
		pipeline.Format(vf),
		pipeline.Start(pipeline.StartOffset(cc.startOffset)),
		pipeline.MaxBufferedRecords(cc.maxBuffered),
		pipeline.FetchMaxBytes(int32(cc.fetchMaxBytes)),
		pipeline.MaxProduceBytes(int32(min(max(cc.maxProduceBytes, -1), pipeline.ProduceBytesCap+1))),
		pipeline.Linger(cc.linger),
		pipeline.TopUpWait(cc.topUpWait),
	}
	if cc.staticMembership {
		opts = append(opts, pipeline.StaticMembership())
	}
	if cc.dlqTopic != "" {
		opts = append(opts, pipeline.DLQTopic(cc.dlqTopic))
	}
	if cc.createTopics {
		opts = append(opts, pipeline.CreateTopics())
	}
	if idem != nil {
		opts = append(opts, pipeline.WithIdempotency(idem))
	}
	return opts, nil
}

// registerNotReplicated counts the Redis round trips whose numbers were
// dropped because fewer replicas than --redis-wait-replicas acknowledged
// them in --redis-wait-timeout.
func registerNotReplicated(reg prometheus.Registerer, kind string, n func() uint64) {
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name:        "flakestream_redis_not_replicated_total",
		Help:        "Redis reservations and key claims dropped because fewer replicas than --redis-wait-replicas acknowledged them in time.",
		ConstLabels: prometheus.Labels{"kind": kind},
	}, func() float64 { return float64(n()) }))
}

package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/eos"
	"github.com/flakestream/flakestream/idgen"
	"github.com/flakestream/flakestream/internal/bench"
	"github.com/flakestream/flakestream/internal/demo"
	"github.com/flakestream/flakestream/pipeline"
	"github.com/redis/go-redis/v9"
	"github.com/urfave/cli/v2"
)

// The bench's own flags.
const (
	flagDuration    = "duration"
	flagPairs       = "pairs"
	flagRecordBytes = "record-bytes"
	flagParallelism = "parallelism"
	flagPairsOnly   = "pairs-only"
	flagCPUProfile  = "cpuprofile"
	flagMemProfile  = "memprofile"
	flagLatencyRate = "latency-rate"
)

// Defaults of the bench, which belongs to the CLI alone.
const (
	defaultBenchDuration    = 3 * time.Second
	defaultBenchPairs       = 3
	defaultBenchRecordBytes = 200
	defaultBenchLatencyRate = 1000
)

// benchConfig is what `flakestream bench` reads from its flags.
type benchConfig struct {
	kafka                  kafkaConfig   // --brokers only
	consume                consumeConfig // --max-poll-records, --topic-wait, --top-up-wait, --lanes
	redis                  string
	duration               time.Duration
	pairs, recordBytes     int
	partitions             int
	parallelism            int
	latencyRate            int
	json, pairsOnly        bool
	verbose                bool
	cpuProfile, memProfile string
	layout                 layoutConfig
	codec                  codecConfig
	schema                 schemaConfig
}

func benchCommand() *cli.Command {
	cfg := &benchConfig{}
	return configured(&cli.Command{
		Name:  "bench",
		Usage: "measure throughput with and without numbering, the origin's way, reservations alone, latency and memory",
		Flags: concat([]cli.Flag{
			brokersFlag(&cfg.kafka.brokers, nil, "Kafka brokers (default: an embedded kfake cluster)"),
			redisURLFlag(&cfg.redis, "", "Redis URL (default: an embedded miniredis; pass a real one for real figures)"),
			durationFlag(flagDuration, &cfg.duration, defaultBenchDuration, "length of each throughput window"),
			intFlag(flagPairs, &cfg.pairs, defaultBenchPairs, "passthrough/worker measurements, interleaved"),
			intFlag(flagRecordBytes, &cfg.recordBytes, defaultBenchRecordBytes, "size of each order event"),
			partitionsFlag(&cfg.partitions, "partitions of every bench topic"),
			cfg.consume.maxPollRecordsFlag(),
			intFlag(flagParallelism, &cfg.parallelism, runtime.GOMAXPROCS(0), "goroutines numbering one batch"),
			cfg.consume.topicWaitFlag(),
			topUpWaitFlag(&cfg.consume.topUpWait),
			lanesFlag(&cfg.consume.lanes, "the worker's lanes, as run's --lanes, auto counting --partitions (the passthrough and per-record baselines run one session)"),
			intFlag(flagLatencyRate, &cfg.latencyRate, defaultBenchLatencyRate, "input rate (orders/s) of the first latency measurement, send to read_committed visibility; the second runs at half the worker's throughput (0: only the second)"),
			jsonFlag(&cfg.json, "print one JSON object"),
			boolFlag(flagPairsOnly, &cfg.pairsOnly, "measure only passthrough and worker (for sweeps over a setting such as --max-poll-records)"),
			verboseFlag(&cfg.verbose, "log what the workers do"),
			stringFlag(flagCPUProfile, &cfg.cpuProfile, "", "write a CPU profile of the whole run to `FILE`"),
			stringFlag(flagMemProfile, &cfg.memProfile, "", "write a heap profile at the end of the run to `FILE`"),
		}, cfg.layout.flags(), cfg.schema.flags()),
		Action: cfg.run,
	})
}

func (cfg *benchConfig) run(c *cli.Context) error {
	l, err := cfg.layout.layout()
	if err != nil {
		return err
	}
	log := slog.New(slog.DiscardHandler)
	if cfg.verbose {
		log = slog.New(slog.NewTextHandler(c.App.ErrWriter, nil))
	}
	brokers, kafkaKind := cfg.kafka.brokers.Value(), "external"
	if len(brokers) == 0 {
		// The cleaner runs often so that topic retention bounds the
		// embedded broker's memory during the run.
		addrs, stop, err := demo.StartKafka(0, nil, map[string]string{"log.cleaner.backoff.ms": "50"})
		if err != nil {
			return err
		}
		defer stop()
		brokers, kafkaKind = addrs, "kfake (embedded)"
	}
	var rc redis.UniversalClient
	redisKind := cfg.redis
	if redisKind == "" {
		c, stop, err := demo.StartRedis()
		if err != nil {
			return err
		}
		defer stop()
		rc, redisKind = c, "miniredis (embedded)"
	} else {
		if rc, _, err = idgen.NewRedisClient(redisKind); err != nil {
			return err
		}
		defer rc.Close()
	}
	if err := withTimeout(c.Context, 5*time.Second, func(ctx context.Context) error { return rc.Ping(ctx).Err() }); err != nil {
		return fmt.Errorf("redis %s: %w", idgen.RedactURL(redisKind), err)
	}
	seq, err := idgen.NewRedisSequencer(idgen.RedisSettings{Client: rc, Prefix: fmt.Sprintf("flakestream-bench-%d", time.Now().UnixNano())})
	if err != nil {
		return err
	}
	if cfg.cpuProfile != "" {
		stop, err := startCPUProfile(cfg.cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	if cfg.memProfile != "" {
		defer writeHeapProfile(cfg.memProfile)
	}
	progress := func(s string) { fmt.Fprintf(c.App.ErrWriter, "bench: %s\n", s) }
	regKind, stopReg, err := cfg.schema.embeddedRegistry()
	if err != nil {
		return err
	}
	defer stopReg()
	bc, err := cfg.benchOptions(brokers, l, seq, log, progress)
	if err != nil {
		return err
	}
	if regKind != "" {
		if err := cfg.withFormat(c.Context, &bc, l); err != nil {
			return err
		}
		progress(fmt.Sprintf("value format %s, schema registry %s", cfg.schema.valueFormat, regKind))
	}
	res, err := bench.Run(c.Context, bc)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	return cfg.print(c, res, kafkaKind, redisKind)
}

// benchOptions turns bench's flags into the bench's configuration: the one
// place the CLI builds it.
func (cfg *benchConfig) benchOptions(brokers []string, l idgen.Layout, seq idgen.Sequencer, log *slog.Logger, progress func(string)) (bench.Config, error) {
	s, err := cfg.consume.settings(&cfg.kafka, nil, log, nil)
	if err != nil {
		return bench.Config{}, err
	}
	lanes, err := parseLanes(cfg.consume.lanes)
	if err != nil {
		return bench.Config{}, err
	}
	if lanes == 0 {
		lanes = pipeline.AutoLanes(runtime.GOMAXPROCS(0), cfg.partitions)
	}
	s.Brokers = brokers // the embedded kfake's without --brokers
	worker := int64(0)
	newGen := func() (*idgen.Generator, error) {
		// A worker ID of its own for every measurement, so no
		// measurement waits on another's milliseconds.
		worker = (worker + 1) % (l.MaxWorker() + 1)
		return idgen.New(idgen.Settings{Layout: l, WorkerID: worker, Sequencer: seq})
	}
	return bench.Config{
		Loop: s, NewNumberer: newGen, Duration: cfg.duration, Pairs: max(cfg.pairs, 1),
		RecordBytes: cfg.recordBytes, Partitions: int32(cfg.partitions), Progress: progress,
		PairsOnly: cfg.pairsOnly, LatencyRate: float64(cfg.latencyRate), Lanes: lanes,
		Worker: []pipeline.Opt{pipeline.Parallelism(cfg.parallelism), pipeline.TopUpWait(cfg.consume.topUpWait)},
	}, nil
}

// withFormat makes the bench feed Avro or Protobuf demo orders (their own
// size, not --record-bytes) and number them through the registry. The
// input subject is "bench-value"; every measurement's worker registers its
// output schema under "bench-numbered-value".
func (cfg *benchConfig) withFormat(ctx context.Context, bc *bench.Config, l idgen.Layout) error {
	cd, err := codec.New(codec.Config{})
	if err != nil {
		return err
	}
	cfg.codec.format = codec.DefaultNumberFormat.String()
	f, err := cfg.codec.valueFormat(&cfg.schema, cd, l, "bench-numbered")
	if err != nil {
		return err
	}
	ev, err := demo.Events(ctx, f, "bench")
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	bc.Event = ev
	bc.Worker = append(bc.Worker, pipeline.Format(f))
	if ev != nil {
		bc.RecordBytes = len(ev(0))
	}
	return nil
}

func (cfg *benchConfig) print(c *cli.Context, res *bench.Result, kafkaKind, redisKind string) error {
	if cfg.json {
		b, _ := json.Marshal(res)
		fmt.Fprintf(c.App.Writer, "%s\n", b)
		return nil
	}
	w := tabwriter.NewWriter(c.App.Writer, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "kafka\t%s\nredis\t%s\nmachine\t%d CPUs, %s\nrecords\t%d bytes, %s windows, %d interleaved pairs\n\n",
		kafkaKind, idgen.RedactURL(redisKind), runtime.NumCPU(), runtime.Version(), res.RecordBytes, cfg.duration, len(res.Pairs))
	fmt.Fprintf(w, "measurement\trecords/s\t\n")
	fmt.Fprintf(w, "passthrough\t%.0f\tthe loop with numbering off: the ceiling\n", res.RecordsPerSec["passthrough"])
	fmt.Fprintf(w, "worker\t%.0f\tthe full worker\n", res.RecordsPerSec["worker"])
	fmt.Fprintf(w, "per_record\t%.0f\tthe origin's way: a Redis call and a synchronous produce per record\n", res.RecordsPerSec["per_record"])
	fmt.Fprintf(w, "numbers\t%.0f/s\treservations alone, one (server, worker) pair; the layout's limit is %d/s\n\n", res.NumbersPerSec, res.Limit)
	fmt.Fprintf(w, "worker_vs_passthrough\t%.3f\tmedian of %d pairwise ratios\n", res.WorkerVsPassthrough, len(res.Pairs))
	fmt.Fprintf(w, "worker_vs_per_record\t%.1f\t\n", res.WorkerVsPerRecord)
	fmt.Fprintf(w, "numbers_vs_limit\t%.3f\t\n", res.NumbersVsLimit)
	for _, l := range res.Latency {
		fmt.Fprintf(w, "latency p50 / p90 / p99 / max\t%.1f / %.1f / %.1f / %.1f ms\tsend to read_committed visibility at %.0f records/s (%d records)\n",
			l.P50Ms, l.P90Ms, l.P99Ms, l.MaxMs, l.Rate, l.Records)
		var parts []string
		for _, phase := range eos.Phases {
			parts = append(parts, fmt.Sprintf("%s %.1f", phase, l.PhaseMeanMs[phase]))
		}
		fmt.Fprintf(w, "  transaction phases\t%s ms\tmean of %d committed transactions at %.0f records/s\n", strings.Join(parts, ", "), l.Transactions, l.Rate)
	}
	where := "the whole process, embedded broker included"
	if kafkaKind == "external" {
		where = "this process; the broker runs elsewhere"
	}
	fmt.Fprintf(w, "peak RSS\t%.1f MiB\t%s\n", float64(res.PeakRSSBytes)/(1<<20), where)
	return w.Flush()
}

func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

func writeHeapProfile(path string) {
	f, err := os.Create(path)
	if err != nil {
		return
	}
	defer f.Close()
	_ = pprof.Lookup("heap").WriteTo(f, 0)
}

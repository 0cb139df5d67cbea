package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"syscall"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/codec/schema"
	"github.com/flakestream/flakestream/eos"
	"github.com/flakestream/flakestream/idgen"
	"github.com/flakestream/flakestream/internal/orders"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr/srfake"
)

// BenchmarkWorkerKfake measures the worker end to end on in-process kfake:
// b.N records of about 200 bytes produced ahead, then consumed, numbered
// and produced transactionally. It
// reports records/s. Redis is REDIS_URL or a miniredis: the prefetcher
// keeps reservations off the measured path either way.
func BenchmarkWorkerKfake(b *testing.B) {
	for _, mode := range []string{"worker"} {
		b.Run(mode, func(b *testing.B) {
			in := "bench"
			c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, in, in+".out", in+".dlq"))
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			mr := miniredis.RunT(b)
			rc := redis.NewClient(&redis.Options{Addr: mr.Addr()})
			defer rc.Close()
			seq, _ := idgen.NewRedisSequencer(idgen.RedisSettings{Client: rc})
			g, _ := idgen.New(idgen.Settings{Sequencer: seq})
			adm := kgo.SeedBrokers(c.ListenAddrs()...)
			cl, err := kgo.NewClient(adm, kgo.RecordPartitioner(kgo.ManualPartitioner()))
			if err != nil {
				b.Fatal(err)
			}
			defer cl.Close()
			recs := orders.Records(in, 1, b.N, orders.Mix{}, 200, 0)
			for i := range recs {
				recs[i].Partition = int32(i % 4)
			}
			ctx := context.Background()
			if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				b.Fatal(err)
			}
			opts := []Opt{setLoop(func(s *eos.Config) { s.Brokers = c.ListenAddrs(); s.Topics = []string{in} }), OutputTopic(in + ".out"), setLoop(func(s *eos.Config) {
				s.Group = fmt.Sprintf("g-%d", b.N)
				s.InstanceID = "b"
				s.Logger = slog.New(slog.DiscardHandler)
			})}
			opts = append(opts, Numbers(g))
			w, err := NewWorker(eos.Config{}, opts...)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			cpu0 := cpuTime()
			b.ResetTimer()
			wctx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- w.Run(wctx) }()
			for w.Stats().In < int64(b.N) {
				time.Sleep(time.Millisecond)
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
			// CPU of the whole process (worker, client and broker) per
			// record: what decides throughput once the cores are busy.
			b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/record")
			cancel()
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		})
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkBatchProcess measures the worker's own work per record, without
// Kafka: inspect, take a number, splice, build the headers and the output
// record, for 10,000 order events on one goroutine, for each value format:
// JSON (about 200 bytes), and the Avro and Protobuf demo order (about 60
// bytes, through srfake; schemas are cached after the first batch, so the
// registry is off the measured path).
func BenchmarkBatchProcess(b *testing.B) {
	for _, vf := range []codec.ValueFormat{codec.ValueJSON, codec.ValueAvro, codec.ValueProtobuf} {
		b.Run(string(vf), func(b *testing.B) { benchBatchProcess(b, vf) })
	}
}

func benchBatchProcess(b *testing.B, vf codec.ValueFormat) {
	g, err := idgen.New(idgen.Settings{Sequencer: idgen.NewMemorySequencer(nil)})
	if err != nil {
		b.Fatal(err)
	}
	c := &cfg{output: "out", dlq: "dlq", parallelism: 1}
	recs := orders.Records("in", 4, 10000, orders.Mix{}, 200, 0)
	ctx := context.Background()
	if vf != codec.ValueJSON {
		reg := srfake.New()
		defer reg.Close()
		f, err := schema.New(schema.Settings{Format: vf, URL: reg.URL(), OutputTopic: "out"})
		if err != nil {
			b.Fatal(err)
		}
		id, err := schema.RegisterDemoSchema(ctx, f.Client(), vf, "in-value")
		if err != nil {
			b.Fatal(err)
		}
		for i, r := range recs {
			r.Value = schema.AppendDemoOrder(nil, vf, id, i, time.Now().UnixMilli())
		}
		c.format = f
	}
	if err := c.validateCodec(); err != nil {
		b.Fatal(err)
	}
	bt := &batch{cfg: c, numberer: idgen.NewPrefetcher(g, 20000, 4096, time.Second), outParts: 4, dlqParts: 4,
		outMax: 1 << 20, dlqMax: 1 << 20, rejecter: &rejecter{}}
	var fs kgo.Fetches
	fs = append(fs, kgo.Fetch{Topics: []kgo.FetchTopic{{Topic: "in", Partitions: []kgo.FetchPartition{{Partition: 0, Records: recs}}}}})
	// One batch ahead: the output schema is registered and cached.
	bt.reset(fs)
	if err := bt.process(ctx, func(*kgo.Record) {}); err != nil {
		b.Fatal(err)
	}
	if bt.counts.numbered != len(recs) {
		b.Fatalf("numbered %d of %d", bt.counts.numbered, len(recs))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		bt.reset(fs)
		if err := bt.process(ctx, func(*kgo.Record) {}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(recs)), "ns/record")
}

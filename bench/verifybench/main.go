// Command verifybench measures `flakestream verify` on a large range: it
// fills an input topic with orders and an output topic with a numbered copy
// of each (in transactions, as the worker writes them), then runs the
// binary's verify --json as a process and prints its records per second and
// peak resident memory (the kernel's maxrss of the child).
//
//	go run ./bench/verifybench -brokers 127.0.0.1:9092 -records 10000000
//
// It fills the topics once per -prefix; run it again with the same prefix
// to measure verify alone.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/internal/orders"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	brokers := flag.String("brokers", "127.0.0.1:9092", "Kafka brokers")
	records := flag.Int("records", 10_000_000, "input records")
	partitions := flag.Int("partitions", 8, "partitions of input and output")
	prefix := flag.String("prefix", "verifybench", "topic name prefix")
	bin := flag.String("bin", "", "flakestream binary (default: go build one)")
	runs := flag.Int("runs", 1, "verify runs")
	flag.Parse()
	if err := run(*brokers, *records, int32(*partitions), *prefix, *bin, *runs); err != nil {
		fmt.Fprintln(os.Stderr, "verifybench:", err)
		os.Exit(1)
	}
}

func run(brokers string, n int, partitions int32, prefix, bin string, runs int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Hour)
	defer cancel()
	input, output := prefix+".in", prefix+".out"
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctx, input)
	filled := int64(0)
	if err == nil {
		ends.Each(func(o kadm.ListedOffset) { filled += max(o.Offset, 0) })
	}
	if filled < int64(n) {
		if err := fill(ctx, brokers, adm, input, output, n, partitions); err != nil {
			return err
		}
	} else {
		fmt.Printf("topics %s and %s already hold %d input records\n", input, output, filled)
	}
	if bin == "" {
		bin = os.TempDir() + "/flakestream-verifybench"
		if out, err := exec.Command("go", "build", "-o", bin, "github.com/flakestream/flakestream").CombinedOutput(); err != nil {
			return fmt.Errorf("go build: %v: %s", err, out)
		}
	}
	for i := 0; i < runs; i++ {
		if err := measure(ctx, bin, brokers, input, output); err != nil {
			return err
		}
	}
	return nil
}

// fill writes n orders to input and a numbered copy of each to output, in
// transactions of 10,000.
func fill(ctx context.Context, brokers string, adm *kadm.Client, input, output string, n int, partitions int32) error {
	for _, t := range []string{input, output} {
		if _, err := adm.CreateTopic(ctx, partitions, 1, nil, t); err != nil && !strings.Contains(err.Error(), "TOPIC_ALREADY_EXISTS") {
			return fmt.Errorf("create %s: %w", t, err)
		}
	}
	in, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(200_000))
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchMaxBytes(1<<20), kgo.TransactionalID(output+"-filler"), kgo.MaxBufferedRecords(200_000))
	if err != nil {
		return err
	}
	defer out.Close()
	start := time.Now()
	const chunk = 10_000
	base := int64(1) << 52
	for i := 0; i < n; i += chunk {
		recs := orders.Records(input, partitions, min(chunk, n-i), orders.Mix{}, 160, 0)
		if err := in.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			return fmt.Errorf("produce input: %w", err)
		}
		if err := out.BeginTransaction(); err != nil {
			return err
		}
		for j, r := range recs {
			num := strconv.FormatInt(base+int64(i+j), 10)
			out.Produce(ctx, &kgo.Record{Topic: output, Partition: r.Partition, Key: r.Key, Value: r.Value, Timestamp: r.Timestamp,
				Headers: []kgo.RecordHeader{{Key: codec.HeaderNumber, Value: []byte(num)},
					{Key: codec.HeaderSource, Value: codec.AppendSource(nil, r.Topic, r.Partition, r.Offset)}}}, nil)
		}
		if err := out.Flush(ctx); err != nil {
			return err
		}
		if err := out.EndTransaction(ctx, kgo.TryCommit); err != nil {
			return fmt.Errorf("commit output: %w", err)
		}
		if (i/chunk)%100 == 99 {
			fmt.Printf("filled %d of %d (%.0f/s)\n", i+chunk, n, float64(i+chunk)/time.Since(start).Seconds())
		}
	}
	fmt.Printf("filled %d input and %d output records in %s\n", n, n, time.Since(start).Round(time.Second))
	return nil
}

// measure runs verify --json once and prints its figures.
func measure(ctx context.Context, bin, brokers, input, output string) error {
	cmd := exec.CommandContext(ctx, bin, "verify", "--brokers", brokers, "--input-topic", input, "--output-topic", output,
		"--dlq-topic", "", "--json", "--log-level", "warn")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	if err != nil {
		return fmt.Errorf("verify: %v: %s", err, stderr.String())
	}
	var rep struct {
		Input       int64   `json:"input"`
		Exact       bool    `json:"exact"`
		RecordsRead int64   `json:"records_read"`
		Seconds     float64 `json:"seconds"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		return fmt.Errorf("verify printed %q: %w", stdout.String(), err)
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	fmt.Printf("verify: input %d exact %t; read %d records in %.1fs (%.0f records/s, wall %.1fs); peak RSS %d MiB; CPU %.1fs\n",
		rep.Input, rep.Exact, rep.RecordsRead, rep.Seconds, float64(rep.RecordsRead)/rep.Seconds, wall.Seconds(), ru.Maxrss>>10, cpu.Seconds())
	return nil
}

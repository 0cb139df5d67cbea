// Command copyloop is the plain franz-go reference of scripts/peer-bench:
// a GroupTransactSession loop, as franz-go's transactions example has it,
// that copies every record of the input to the output unchanged, exactly
// once. It has none of the worker's loop (no guard, no top-up poll, no
// lag, no metrics) and does no numbering, so the worker's CPU per record
// over this one's is what the worker costs over the least a transactional
// copy can cost.
//
//	copyloop -brokers 127.0.0.1:9092 -input in -output out -group g -txn-id t [-pprof-addr 127.0.0.1:6060]
//
// -pprof-addr serves Go's profiles (net/http/pprof) for scripts/peer-bench
// --profile, as flakestream run --pprof does.
//
// It runs until SIGTERM or SIGINT, or -timeout.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	_ "net/http/pprof" // -pprof-addr serves the default mux, where it registers
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	brokers := flag.String("brokers", "127.0.0.1:9092", "seed brokers, comma-separated")
	input := flag.String("input", "", "topic to copy (required)")
	output := flag.String("output", "", "topic to copy into (required)")
	group := flag.String("group", "", "consumer group (required)")
	txnID := flag.String("txn-id", "", "transactional ID (required)")
	timeout := flag.Duration("timeout", 30*time.Minute, "stop after this long")
	pprofAddr := flag.String("pprof-addr", "", "serve /debug/pprof/ on this address (\"\": off)")
	flag.Parse()
	if *input == "" || *output == "" || *group == "" || *txnID == "" {
		fmt.Fprintln(os.Stderr, "copyloop: -input, -output, -group and -txn-id are required")
		os.Exit(2)
	}
	if *pprofAddr != "" {
		l, err := net.Listen("tcp", *pprofAddr)
		if err != nil {
			fmt.Fprintln(os.Stderr, "copyloop: -pprof-addr:", err)
			os.Exit(2)
		}
		srv := &http.Server{ReadHeaderTimeout: 5 * time.Second} // the default mux
		go func() { _ = srv.Serve(l) }()
		defer srv.Close()
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	if err := run(ctx, strings.Split(*brokers, ","), *input, *output, *group, *txnID); err != nil {
		fmt.Fprintln(os.Stderr, "copyloop:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, brokers []string, input, output, group, txnID string) error {
	sess, err := kgo.NewGroupTransactSession(
		kgo.SeedBrokers(brokers...),
		kgo.TransactionalID(txnID),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(input),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.DefaultProduceTopic(output),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
	)
	if err != nil {
		return err
	}
	defer sess.Close()
	for {
		fetches := sess.PollRecords(ctx, 10000)
		if ctx.Err() != nil {
			return nil
		}
		if fetches.IsClientClosed() {
			return errors.New("client closed")
		}
		var ferr error
		fetches.EachError(func(t string, p int32, err error) { ferr = fmt.Errorf("fetch %s/%d: %w", t, p, err) })
		if ferr != nil {
			return ferr
		}
		if err := sess.Begin(); err != nil {
			return err
		}
		fetches.EachRecord(func(r *kgo.Record) {
			sess.Produce(ctx, &kgo.Record{Key: r.Key, Value: r.Value, Headers: r.Headers, Timestamp: r.Timestamp, Partition: r.Partition}, nil)
		})
		committed, err := sess.End(ctx, kgo.TryCommit)
		if err != nil && ctx.Err() == nil {
			return err
		}
		_ = committed // not committed: a rebalance aborted it, and the records come again
	}
}

package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flakestream/flakestream/internal/orders"
	"github.com/twmb/franz-go/pkg/kgo"
)

// StreamConfig says what a Stream writes.
type StreamConfig struct {
	Records int        // how many orders in all
	Rate    int        // orders per second (0: as fast as the broker takes them)
	Mix     orders.Mix // bad and already numbered events per thousand
	Size    int        // bytes of a clean event (default 200)
}

// Stream writes orders to the input topic in the background, at a steady
// rate, while workers run and faults happen: order i goes to partition
// i mod partitions, so each partition's offsets follow i.
type Stream struct {
	e     *Env
	cfg   StreamConfig
	cl    *kgo.Client
	acked atomic.Int64
	done  chan struct{}
	err   error

	mu   sync.Mutex
	recs []*kgo.Record
}

// StartStream starts writing. The records join e.Inputs() when Wait returns.
func (e *Env) StartStream(t testing.TB, cfg StreamConfig) *Stream {
	t.Helper()
	if cfg.Size == 0 {
		cfg.Size = 200
	}
	// Records of several MiB in flight at once during a broker restart are
	// bounded by MaxBufferedRecords: Produce blocks rather than piling up.
	opts := []kgo.Opt{kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.MaxBufferedRecords(20000), kgo.ProducerBatchMaxBytes(1 << 20)}
	if l := e.streamLogger(t); l != nil {
		opts = append(opts, kgo.WithLogger(l))
	}
	cl := e.Kafka.Client(t, opts...)
	s := &Stream{e: e, cfg: cfg, cl: cl, done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); <-s.done })
	go s.run(ctx)
	return s
}

// streamLogger is the stream's client logger when
// $FLAKESTREAM_E2E_STREAM_LOG names a franz-go level (debug, info, warn,
// error): the client's own lines, to <log dir>/stream.log, beside the
// workers' logs, so that a stall of the input can be told from one of the
// workers. Unset, the stream's client logs nothing.
func (e *Env) streamLogger(t testing.TB) kgo.Logger {
	t.Helper()
	v := os.Getenv("FLAKESTREAM_E2E_STREAM_LOG")
	if v == "" {
		return nil
	}
	levels := map[string]kgo.LogLevel{"debug": kgo.LogLevelDebug, "info": kgo.LogLevelInfo, "warn": kgo.LogLevelWarn, "error": kgo.LogLevelError}
	level, ok := levels[v]
	if !ok {
		t.Fatalf("test/faults: FLAKESTREAM_E2E_STREAM_LOG=%q: want debug, info, warn or error", v)
	}
	f, err := os.Create(filepath.Join(e.logDir, "stream.log"))
	if err != nil {
		t.Fatalf("test/faults: stream log: %v", err)
	}
	t.Cleanup(func() { f.Close() })
	return kgo.BasicLogger(f, level, func() string { return time.Now().UTC().Format("15:04:05.000000 ") })
}

func (s *Stream) run(ctx context.Context) {
	defer close(s.done)
	const chunk = 500
	base := time.Now().Truncate(time.Millisecond)
	start := time.Now()
	var mu sync.Mutex
	var firstErr error
	for i := 0; i < s.cfg.Records; i += chunk {
		if s.cfg.Rate > 0 {
			due := start.Add(time.Duration(float64(i) / float64(s.cfg.Rate) * float64(time.Second)))
			if d := time.Until(due); d > 0 {
				select {
				case <-ctx.Done():
				case <-time.After(d):
				}
			}
		}
		if ctx.Err() != nil {
			s.err = ctx.Err()
			return
		}
		n := min(chunk, s.cfg.Records-i)
		recs := make([]*kgo.Record, n)
		for j := range recs {
			k := i + j
			kind := s.cfg.Mix.KindOf(k)
			recs[j] = &kgo.Record{
				Topic:     s.e.Input,
				Partition: int32(k) % s.e.Partitions,
				Key:       []byte("ORD-" + strconv.Itoa(k)),
				Value:     orders.Event(k, kind, s.cfg.Size, 1<<40+int64(k)),
				Headers:   []kgo.RecordHeader{{Key: "source-system", Value: []byte("shop-eu")}},
				// Milliseconds, as Kafka keeps them, so that the output's
				// timestamp compares equal to the input's.
				Timestamp: base.Add(time.Duration(k) * time.Microsecond).Truncate(time.Millisecond),
			}
		}
		s.mu.Lock()
		s.recs = append(s.recs, recs...)
		s.mu.Unlock()
		for _, r := range recs {
			s.cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
				s.acked.Add(1)
			})
		}
	}
	if err := s.cl.Flush(ctx); err != nil {
		s.err = err
		return
	}
	mu.Lock()
	s.err = firstErr
	mu.Unlock()
}

// Acked returns how many orders the broker has acknowledged so far.
func (s *Stream) Acked() int64 { return s.acked.Load() }

// Wait waits until every order is written (or timeout passes), then adds
// them to the env's inputs.
func (s *Stream) Wait(t testing.TB, timeout time.Duration) {
	t.Helper()
	select {
	case <-s.done:
	case <-time.After(timeout):
		t.Fatalf("test/faults: stream: %d of %d orders acknowledged after %s", s.Acked(), s.cfg.Records, timeout)
	}
	if s.err != nil {
		t.Fatalf("test/faults: stream: %v", s.err)
	}
	if got := s.Acked(); got != int64(s.cfg.Records) {
		t.Fatalf("test/faults: stream: %d of %d orders acknowledged", got, s.cfg.Records)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.e.AddInputs(s.recs)
	s.recs = nil
}

func (c StreamConfig) String() string {
	return fmt.Sprintf("%d orders at %d/s, %d bad and %d numbered per mille", c.Records, c.Rate, c.Mix.BadPerMille, c.Mix.NumberedPerMille)
}

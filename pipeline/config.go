package pipeline

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/eos"
	"github.com/flakestream/flakestream/idgen"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Numberer issues increasing numbers in blocks: *idgen.Generator, or an
// *idgen.Prefetcher over one.
type Numberer = idgen.Numberer

// StartOffset is where a consumer group with no committed offsets starts.
type StartOffset string

// Start offsets.
const (
	StartEarliest StartOffset = "earliest"
	StartLatest   StartOffset = "latest"
)

// Errors of the worker's own configuration and run; those it shares with
// every product of the loop (no brokers, a missing topic, fatal) are
// package loop's.
var (
	ErrNoOutput   = errors.New("pipeline: no output topic")  // OutputTopic not given
	ErrNoNumberer = errors.New("pipeline: no numberer")      // Numbers not given
	ErrNumbering  = errors.New("pipeline: numbering failed") // the sequencer (Redis) or the idempotency key store failed
)

type cfg struct {
	eos             eos.Config
	start           StartOffset
	output          string
	dlq             string
	numberer        Numberer
	codec           *codec.Codec
	format          codec.Format
	maxBuffered     int
	fetchMaxBytes   int32
	linger          time.Duration
	createTopics    bool
	prefetch        int
	parallelism     int
	idem            *Idempotency
	trust           Trust
	judge           *judge
	prefetchAge     time.Duration
	noLag           bool // a lane other than the first: the group's lag is lane 0's
	lanes           int  // the process's lanes, which share its buffer bounds (0: one)
	maxProduceBytes int32
}

func defaultCfg(s eos.Config) cfg {
	return cfg{
		eos:           func() eos.Config { s.Name, s.TopUpWait = "worker", DefaultTopUpWait; return s }(),
		start:         DefaultStartOffset,
		maxBuffered:   DefaultMaxBufferedRecords,
		fetchMaxBytes: DefaultFetchMaxBytes,
		linger:        0,
		prefetch:      -1,
		parallelism:   runtime.GOMAXPROCS(0),
		prefetchAge:   time.Second,
	}
}

func (c *cfg) validate() error {
	if err := c.validateLoop(); err != nil {
		return err
	}
	if c.numberer == nil {
		return ErrNoNumberer
	}
	if c.idem != nil && c.idem.Store == nil {
		return fmt.Errorf("%w: no key store", ErrIdempotencyKey)
	}
	if n := c.maxProduceBytes; n != 0 && (n < MinDLQBytes || n > ProduceBytesCap) {
		return fmt.Errorf("%w: max produce bytes %d: want 0 (each topic's own limit) or %d to %d", eos.ErrBadConfig, n, MinDLQBytes, ProduceBytesCap)
	}
	if c.parallelism < 1 {
		c.parallelism = 1
	}
	if c.prefetch < 0 {
		c.prefetch = 2 * c.eos.MaxPollRecords
	}
	j, err := newJudge(c.trust, c.numberer)
	if err != nil {
		return err
	}
	c.judge = j
	return c.validateCodec()
}

// validateLoop checks what the eos loop and the topics need and sets the
// worker's own client options.
func (c *cfg) validateLoop() error {
	e := &c.eos
	if err := e.Validate(); err != nil {
		return err
	}
	if c.output == "" {
		return ErrNoOutput
	}
	if c.dlq == "" {
		c.dlq = e.Topics[0] + ".dlq"
	}
	if err := e.CheckNotInput(c.output, c.dlq); err != nil {
		return err
	}
	if c.start != StartEarliest && c.start != StartLatest {
		return fmt.Errorf("%w: start offset %q: want earliest or latest", eos.ErrBadConfig, c.start)
	}
	e.StartAtEnd = c.start == StartLatest
	if e.MaxPollRecords < 1 || c.maxBuffered < e.MaxPollRecords {
		return fmt.Errorf("%w: max poll records %d, max buffered records %d: want 1 <= poll <= buffered", eos.ErrBadConfig, e.MaxPollRecords, c.maxBuffered)
	}
	buffered, fetch, partFetch := c.laneShare()
	e.ClientOpts = append([]kgo.Opt{
		kgo.FetchMaxBytes(fetch),
		kgo.FetchMaxPartitionBytes(partFetch),
		kgo.MaxBufferedRecords(buffered),
		kgo.ProducerLinger(c.linger),
	}, e.ClientOpts...)
	return nil
}

// laneShare returns one lane's share of the process's buffer bounds: the
// records buffered for producing, the bytes of a fetch response and of one
// partition in it, each divided by the lanes. A share never goes below
// what one transaction needs (MaxPollRecords) or below minFetchShare;
// Kafka returns a partition's first record batch whole even when it is
// larger than the bound, so a small share slows a fetch but never stops it.
func (c *cfg) laneShare() (buffered int, fetch, partFetch int32) {
	n := max(c.lanes, 1)
	buffered = max(c.maxBuffered/n, c.eos.MaxPollRecords)
	fetch = max(c.fetchMaxBytes/int32(n), min(c.fetchMaxBytes, minFetchShare))
	partFetch = min(max(DefaultFetchMaxPartitionBytes/int32(n), minFetchShare), fetch)
	return buffered, fetch, partFetch
}

// minFetchShare is the least a lane's share of a fetch bound is cut to.
const minFetchShare = 128 << 10

// LoopConfig returns the eos loop that s and opts describe, and the output
// topic, for a step that runs with the worker's Kafka settings instead of
// the worker (the bench's baselines). Numbers is not needed.
func LoopConfig(s eos.Config, opts ...Opt) (eos.Config, string, error) {
	c := defaultCfg(s)
	if err := eos.Configure(&c, opts, c.validateLoop); err != nil {
		return eos.Config{}, "", err
	}
	return c.eos, c.output, nil
}

// validateCodec fills in the default codec and the format: JSON through
// the codec unless Format set another.
func (c *cfg) validateCodec() error {
	if c.codec == nil {
		cd, err := codec.New(codec.Config{})
		if err != nil {
			return err
		}
		c.codec = cd
	}
	if c.format == nil {
		c.format = codec.JSONFormat{C: c.codec}
	}
	return nil
}

// formatError classifies an error from the Format (never the record's
// fault): a registry outage (codec.ErrUnavailable) fails the batch, which
// is aborted and retried like a Redis outage; anything else (an output
// schema the registry refuses, a bad setting) can only fail again, so it
// ends Run.
func formatError(err error) error {
	if errors.Is(err, codec.ErrUnavailable) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err // Process wraps it in ErrNumbering
	}
	return fmt.Errorf("%w: %w", eos.ErrFatal, err)
}

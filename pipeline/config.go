package pipeline

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/idgen"
	"github.com/flakestream/flakestream/internal/eos"
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

// Errors of configuration: NewWorker returns them before anything
// connects. Those the worker shares with the auditor are the eos loop's
// values, so errors.Is holds whichever package names them.
var (
	ErrNoBrokers  = eos.ErrNoBrokers                        // Brokers not given
	ErrNoInput    = eos.ErrNoInput                          // InputTopics not given
	ErrNoOutput   = errors.New("pipeline: no output topic") // OutputTopic not given
	ErrNoGroup    = eos.ErrNoGroup                          // Group not given
	ErrNoNumberer = errors.New("pipeline: no numberer")     // Numbers not given
	ErrNoInstance = eos.ErrNoInstance                       // InstanceID "" and no TransactionalID
	ErrSameTopic  = eos.ErrSameTopic                        // the output or DLQ topic is an input
	ErrBadConfig  = eos.ErrBadConfig                        // a value out of its range
)

// Errors of a running worker. Run ends with ErrFatal or ErrMissingTopic;
// the others fail one batch, which is aborted and retried, and Ready
// reports them until a batch commits.
var (
	ErrMissingTopic  = eos.ErrMissingTopic                      // output or DLQ missing, CreateTopics off
	ErrFatal         = eos.ErrFatal                             // not authorized: retrying cannot help (a fenced session is replaced)
	ErrNumbering     = errors.New("pipeline: numbering failed") // the sequencer (Redis) or the idempotency key store failed
	ErrCommitAborted = eos.ErrCommitAborted                     // a produce failed, so the transaction aborted
)

type cfg struct {
	eos           eos.Config
	start         StartOffset
	output        string
	dlq           string
	numberer      Numberer
	codec         *codec.Codec
	format        codec.Format
	maxBuffered   int
	fetchMaxBytes int32
	linger        time.Duration
	createTopics  bool
	prefetch      int
	parallelism   int
	idem          *Idempotency
	prefetchAge   time.Duration
	noLag         bool // a lane other than the first: the group's lag is lane 0's
}

func defaultCfg() cfg {
	loop := eos.DefaultConfig("worker")
	loop.TopUpWait = DefaultTopUpWait
	return cfg{
		eos:           loop,
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
	if c.parallelism < 1 {
		c.parallelism = 1
	}
	if c.prefetch < 0 {
		c.prefetch = 2 * c.eos.MaxPollRecords
	}
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
		return fmt.Errorf("%w: start offset %q: want earliest or latest", ErrBadConfig, c.start)
	}
	e.StartAtEnd = c.start == StartLatest
	if e.MaxPollRecords < 1 || c.maxBuffered < e.MaxPollRecords {
		return fmt.Errorf("%w: max poll records %d, max buffered records %d: want 1 <= poll <= buffered", ErrBadConfig, e.MaxPollRecords, c.maxBuffered)
	}
	e.ClientOpts = append([]kgo.Opt{
		kgo.FetchMaxBytes(c.fetchMaxBytes),
		kgo.MaxBufferedRecords(c.maxBuffered),
		kgo.ProducerLinger(c.linger),
	}, e.ClientOpts...)
	return nil
}

// LoopConfig returns the eos loop settings that opts describe, and the
// output topic, for a step that runs with the worker's Kafka settings
// instead of the worker (the bench's baselines). Numbers is not needed.
func LoopConfig(opts ...Opt) (eos.Config, string, error) {
	c := defaultCfg()
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
	return fmt.Errorf("%w: %w", ErrFatal, err)
}

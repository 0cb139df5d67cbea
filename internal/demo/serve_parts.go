package demo

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/idgen"
	"github.com/flakestream/flakestream/internal/orders"
	"github.com/flakestream/flakestream/verify"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// serveProducer writes the steady order stream of `demo --serve` and feeds
// every order, once Kafka gave it an offset, to the accounting.
type serveProducer struct {
	cl       *kgo.Client
	topic    string
	parts    int32
	rate     int
	upstream *idgen.Generator // server 2: the numbers of orders numbered upstream
	window   *verify.Window
	format   codec.Format // how the worker reads the orders
	produced atomic.Int64
}

// passthroughEvery: one order in this many comes numbered already, from
// another issuer (server 2), and passes through unchanged.
const passthroughEvery = 100

func newServeProducer(brokers []string, topic string, parts int32, rate int, window *verify.Window, format codec.Format) (*serveProducer, error) {
	up, err := idgen.New(idgen.Settings{ServerID: 2, WorkerID: 1, Sequencer: idgen.NewMemorySequencer(nil)})
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return nil, err
	}
	return &serveProducer{cl: cl, topic: topic, parts: parts, rate: rate, upstream: up, window: window, format: format}, nil
}

// run produces rate orders a second, in a batch every 10 ms, until ctx
// ends. A batch is produced and fed to the accounting whole, even when
// ctx ends meanwhile, so that every order in Kafka is one it knows.
func (p *serveProducer) run(ctx context.Context) error {
	const tick = 10 * time.Millisecond
	t := time.NewTicker(tick)
	defer t.Stop()
	start := time.Now()
	var i int
	mix := orders.Mix{BadPerMille: 1}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		due := int(time.Since(start).Seconds() * float64(p.rate))
		if due-i > 10*p.rate {
			// Ten seconds behind (a slow machine): keep the pace from now
			// on rather than burst to catch up.
			start = time.Now().Add(-time.Duration(float64(i) / float64(p.rate) * float64(time.Second)))
			due = i + p.rate/100 + 1
		}
		n := min(due-i, 10000)
		if n <= 0 {
			continue
		}
		batch := make([]*kgo.Record, 0, n)
		now := time.Now().Truncate(time.Millisecond)
		// The batch is made whole too: a stop while an upstream number is
		// drawn (in memory, a millisecond at most) must not turn into an
		// error that fails the demo's check.
		bctx := context.WithoutCancel(ctx)
		for range n {
			r, err := p.order(bctx, i, mix, now)
			if err != nil {
				return err
			}
			batch = append(batch, r)
			i++
		}
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		err := p.cl.ProduceSync(pctx, batch...).FirstErr()
		cancel()
		if err != nil {
			return fmt.Errorf("produce orders: %w", err)
		}
		for _, r := range batch {
			if err := p.window.InputRecord(bctx, r, p.format); err != nil {
				return err
			}
		}
		p.produced.Add(int64(n))
	}
}

// order is order i. One in passthroughEvery carries a number from
// upstream and goes to the last partition, which carries only those: two
// issuers interleaved in one partition would (truly) make numbers go
// backwards there, which the audit flags. The others spread over the
// other partitions, one in a thousand malformed, every dead-letter class
// in turn.
func (p *serveProducer) order(ctx context.Context, i int, mix orders.Mix, now time.Time) (*kgo.Record, error) {
	kind, part, num := mix.KindOf(i), int32(i)%max(p.parts-1, 1), int64(0)
	if p.parts > 1 && i%passthroughEvery == passthroughEvery/2 {
		id, err := p.upstream.Next(ctx)
		if err != nil {
			return nil, err
		}
		kind, part, num = orders.Numbered, p.parts-1, id
	}
	return &kgo.Record{Topic: p.topic, Partition: part, Key: []byte("ORD-" + strconv.Itoa(i)),
		Value: orders.Event(i, kind, 200, num), Timestamp: now,
		Headers: []kgo.RecordHeader{{Key: "source-system", Value: []byte("shop-eu")}}}, nil
}

// serveFollower reads the output, dead-letter and audit topics
// read_committed as they grow, feeds the accounting, and counts; it keeps
// a few samples, the dead letters by class, and where it is in each
// partition.
type serveFollower struct {
	cl                 *kgo.Client
	window             *verify.Window
	format             codec.Format
	output, dlq, audit string
	outputs, audited   atomic.Int64

	mu      sync.Mutex
	err     error                      // the first record the accounting could not read
	pos     map[string]map[int32]int64 // next offset to read
	byClass map[string]int
	outSamp []*kgo.Record
	audSamp []string
}

func newServeFollower(brokers []string, window *verify.Window, format codec.Format, output, dlq, audit string) (*serveFollower, error) {
	// Control records are kept so that the position passes the markers
	// that end a partition (see kread.ReadCommitted).
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(output, dlq, audit),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.KeepControlRecords())
	if err != nil {
		return nil, err
	}
	return &serveFollower{cl: cl, window: window, format: format, output: output, dlq: dlq, audit: audit,
		pos: map[string]map[int32]int64{}, byClass: map[string]int{}}, nil
}

// run reads until ctx ends.
func (f *serveFollower) run(ctx context.Context) error {
	for {
		fs := f.cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err := fs.Err0(); err != nil {
			return fmt.Errorf("read: %w", err)
		}
		fs.EachRecord(f.take)
		if err := f.failed(); err != nil {
			return err
		}
	}
}

// failed is the first record the accounting could not read, if any.
func (f *serveFollower) failed() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

func (f *serveFollower) take(r *kgo.Record) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pos[r.Topic] == nil {
		f.pos[r.Topic] = map[int32]int64{}
	}
	f.pos[r.Topic][r.Partition] = r.Offset + 1
	if r.Attrs.IsControl() {
		return
	}
	switch r.Topic {
	case f.output:
		f.copy(r, false)
		f.outputs.Add(1)
		if len(f.outSamp) < 3 && (len(f.outSamp) == 0 || f.outSamp[len(f.outSamp)-1].Partition != r.Partition) {
			f.outSamp = append(f.outSamp, r)
		}
	case f.dlq:
		f.copy(r, true)
		class, _ := codec.LastHeader(r.Headers, codec.HeaderErrorClass)
		f.byClass[string(class)]++
	case f.audit:
		f.audited.Add(1)
		if len(f.audSamp) < 3 {
			f.audSamp = append(f.audSamp, string(r.Value))
		}
	}
}

// copy feeds an output record or a dead letter to the accounting; f.mu
// is held.
func (f *serveFollower) copy(r *kgo.Record, dead bool) {
	if err := f.window.Copy(context.Background(), r, dead, f.format); err != nil && f.err == nil {
		f.err = err
	}
}

// positions returns where the follower is in topic.
func (f *serveFollower) positions(topic string) map[int32]int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.pos[topic])
}

func (f *serveFollower) deadLetters() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.byClass)
}

func (f *serveFollower) outputSamples() []*kgo.Record {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.outSamp
}

func (f *serveFollower) auditSamples() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.audSamp
}

// readToEnd waits until the follower has read topics to the end offsets
// they have now; their writers must have stopped.
func (f *serveFollower) readToEnd(ctx context.Context, died <-chan error, topics ...string) error {
	ends, err := kadm.NewClient(f.cl).ListEndOffsets(ctx, topics...)
	if err != nil {
		return fmt.Errorf("end offsets of %v: %w", topics, err)
	}
	if err := ends.Error(); err != nil {
		return fmt.Errorf("end offsets of %v: %w", topics, err)
	}
	return waitUntil(ctx, died, func() bool {
		reached := true
		ends.Each(func(o kadm.ListedOffset) {
			if o.Offset > 0 && f.positions(o.Topic)[o.Partition] < o.Offset {
				reached = false
			}
		})
		return reached
	}, func() string { return fmt.Sprintf("the accounting read %v short of their end", topics) })
}

// serveTrimmer deletes from the embedded Kafka, which keeps its log in
// memory, what every reader of a topic has read: the worker (input), the
// audit and the accounting (output), the accounting (dead letters, audit
// records). Nothing unread is deleted, so the accounting stays exact.
type serveTrimmer struct {
	fol                            *serveFollower
	adm                            *kadm.Client
	input, output, dlq, auditTopic string
	// deleted is the sum of the log start offsets: the records deleted.
	deleted  map[string]map[int32]int64
	failures int
	lastErr  error
}

// deletedRecords is how many records the trimmer deleted.
func (t *serveTrimmer) deletedRecords() (n int64) {
	for _, m := range t.deleted {
		for _, v := range m {
			n += v
		}
	}
	return n
}

func newServeTrimmer(fol *serveFollower, input, output, dlq, auditTopic string) *serveTrimmer {
	return &serveTrimmer{fol: fol, adm: kadm.NewClient(fol.cl), input: input, output: output, dlq: dlq, auditTopic: auditTopic,
		deleted: map[string]map[int32]int64{}}
}

// trimWithin trims, bounded by d.
func (t *serveTrimmer) trimWithin(ctx context.Context, d time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return t.trim(ctx)
}

// trim deletes what was read, and counts a failure (memory then grows
// until a later trim succeeds).
func (t *serveTrimmer) trim(ctx context.Context) error {
	if err := t.deleteRead(ctx); err != nil {
		t.failures++
		t.lastErr = err
		return err
	}
	return nil
}

func (t *serveTrimmer) deleteRead(ctx context.Context) error {
	committed := func(group, topic string) (map[int32]int64, error) {
		offs, err := t.adm.FetchOffsets(ctx, group)
		if err == nil {
			err = offs.Error()
		}
		if err != nil {
			return nil, fmt.Errorf("committed offsets of %s: %w", group, err)
		}
		m := map[int32]int64{}
		offs.Each(func(o kadm.OffsetResponse) {
			if o.Topic == topic && o.At > 0 {
				m[o.Partition] = o.At
			}
		})
		return m, nil
	}
	worker, err := committed(workerGroup, t.input)
	if err != nil {
		return err
	}
	auditor, err := committed(auditGroup, t.output)
	if err != nil {
		return err
	}
	read := t.fol.positions(t.output)
	for p, at := range read {
		read[p] = min(at, auditor[p]) // a partition the audit has not committed: 0, nothing deleted
	}
	var del kadm.Offsets
	for topic, m := range map[string]map[int32]int64{t.input: worker, t.output: read,
		t.dlq: t.fol.positions(t.dlq), t.auditTopic: t.fol.positions(t.auditTopic)} {
		for p, at := range m {
			if at > 0 {
				del.Add(kadm.Offset{Topic: topic, Partition: p, At: at, LeaderEpoch: -1})
			}
		}
	}
	if len(del) == 0 {
		return nil
	}
	res, err := t.adm.DeleteRecords(ctx, del)
	if err != nil {
		return err
	}
	res.Each(func(r kadm.DeleteRecordsResponse) {
		if r.Err == nil {
			if t.deleted[r.Topic] == nil {
				t.deleted[r.Topic] = map[int32]int64{}
			}
			t.deleted[r.Topic][r.Partition] = r.LowWatermark
		}
	})
	return res.Error()
}

package verify

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/internal/kafkaacl"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"
)

// DefaultStallTimeout is how long a read may go without a record before
// Run gives up on it, when Config.StallTimeout is 0.
const DefaultStallTimeout = time.Minute

// Config is one reconciliation of a range of input topics against the
// output topic and the DLQ.
type Config struct {
	// Brokers and KafkaOpts (TLS, SASL) reach the cluster. Brokers is
	// required.
	Brokers   []string
	KafkaOpts []kgo.Opt
	// Principal is who KafkaOpts sign in as, spelled as kafka-acls takes
	// it (User:NAME), for the line that says which right a refusal wants;
	// "" says "your principal".
	Principal string
	// Inputs are the input topics (at least one), Output the topic the
	// worker numbered them into (required), DLQ its dead-letter topic (""
	// for none: then dead-lettered records count as lost).
	Inputs []string
	Output string
	DLQ    string
	// OptionalDLQ: a DLQ that does not exist is left out, with a note,
	// instead of being an error.
	OptionalDLQ bool
	// From and To bound the input range, [From, To); the zero Bound is the
	// log start and the last stable offset when Run starts.
	From, To Bound
	// AllPartitions checks every partition of the inputs even when From
	// or To lists partition offsets; one neither lists then runs from the
	// log start or to the last stable offset. Without it only the listed
	// partitions are checked, as a replay with the same bounds covers only
	// those.
	AllPartitions bool
	// Group is the worker's consumer group. Set, an input record in
	// neither the output nor the DLQ at or after the offset the group has
	// committed is pending (the worker has not got there yet), not lost.
	// "": every such record is lost.
	Group string
	// Wait, with Group, first waits up to this long for the group to
	// commit the whole range, so that nothing is left pending.
	Wait time.Duration
	// Format reads values as the worker did: whether an input record
	// already carried a valid number (it is passed through), and the
	// number of an output record that has no number header. Required.
	Format codec.Format
	// Progress, if set, is called now and then with the offsets read and
	// the offsets to read in all.
	Progress func(done, total int64)
	// Log, if set, gets a line per clamped range.
	Log *slog.Logger
	// StallTimeout bounds how long a read may go without a record while
	// partitions are left to read. Default DefaultStallTimeout.
	StallTimeout time.Duration
	// Readers is how many Kafka clients read each side (the input, and
	// the output with the DLQ), their partitions split among them, so
	// that one fetch's wait does not stall the side. Default 2.
	Readers int
	// Planned, if set, is called with the input ranges once they are
	// resolved, before any record is read (the CLI sizes its memory limit
	// by LedgerBytes of them).
	Planned func([]Range)
}

// LedgerBytes is about what the ledger of ranges holds in memory.
func LedgerBytes(ranges []Range) int64 {
	var n int64
	for _, r := range ranges {
		n += max(r.To-r.From, 0)
	}
	return n*9 + n*3/8
}

// Result is a Report with what was read to make it.
type Result struct {
	Report
	// Ranges is the input range checked, per partition.
	Ranges []Range `json:"ranges"`
	// Notes say where a range was clamped (retention, the last stable
	// offset) or a DLQ left out.
	Notes []string `json:"notes,omitempty"`
	// RecordsRead counts the records read from the input, the output and
	// the DLQ; Seconds is how long reading took.
	RecordsRead int64   `json:"records_read"`
	Seconds     float64 `json:"seconds"`
}

// Run reads the input range and the whole output and DLQ (each from its
// log start to its last stable offset when Run starts, read_committed)
// and returns their reconciliation. It only reads: it joins no group and
// commits nothing. The input and the output are read side by side.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if err := cfg.validate(); err != nil {
		return Result{}, err
	}
	if cfg.StallTimeout <= 0 {
		cfg.StallTimeout = DefaultStallTimeout
	}
	if cfg.Readers <= 0 {
		cfg.Readers = 1
	}
	start := time.Now()
	in, out, compacted, notes, err := plan(ctx, &cfg)
	if err != nil {
		return Result{}, kafkaacl.WithPrincipal(err, cfg.Principal)
	}
	if cfg.Planned != nil {
		cfg.Planned(in.ranges)
	}
	l := NewLedger(in.ranges)
	l.NotCheckable(in.notCheckable)
	markPending(l, in.committed, in.ranges)
	r := &reader{cfg: cfg, l: l, total: span(in.ranges) + span(out.ranges)}
	g, gctx := errgroup.WithContext(ctx)
	// Each input partition is read by one client, so the input side's
	// ledger calls never share a partition; the output side's are
	// serialized by outMu.
	for _, part := range split(in.ranges, cfg.Readers) {
		g.Go(func() error { return r.read(gctx, part, r.input) })
	}
	for _, part := range split(out.ranges, cfg.Readers) {
		g.Go(func() error { return r.read(gctx, part, r.output) })
	}
	stopProgress := r.reportProgress(gctx)
	err = g.Wait()
	stopProgress()
	if err != nil {
		return Result{}, kafkaacl.WithPrincipal(err, cfg.Principal)
	}
	for _, rg := range in.ranges {
		if compacted[rg.Topic] {
			l.countCompacted(rg)
		}
	}
	res := Result{Report: l.Report(), Ranges: in.ranges, Notes: notes,
		RecordsRead: r.records.Load(), Seconds: time.Since(start).Seconds()}
	return res, nil
}

// plan resolves the ranges to read: the input's, the output's and the
// DLQ's (a missing optional DLQ is left out of cfg, with a note), which
// input topics are compacted, and the notes on what was clamped.
func plan(ctx context.Context, cfg *Config) (in, out *resolved, compacted map[string]bool, notes []string, err error) {
	admCl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(cfg.Brokers...)}, cfg.KafkaOpts...)...)
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("verify: kafka client: %w", err)
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	if cfg.OptionalDLQ && cfg.DLQ != "" {
		if td, err := adm.ListTopics(ctx, cfg.DLQ); err == nil && td[cfg.DLQ].Err != nil {
			notes = append(notes, fmt.Sprintf("no dead-letter topic %s: dead letters are not counted", cfg.DLQ))
			cfg.DLQ = ""
		}
	}
	if err := checkTopics(ctx, adm, cfg.topics()); err != nil {
		return nil, nil, nil, nil, err
	}
	if in, err = resolve(ctx, adm, cfg.Inputs, cfg.From, cfg.To, cfg.AllPartitions); err != nil {
		return nil, nil, nil, nil, err
	}
	if cfg.Group != "" {
		var more []string
		if in.committed, more, err = committed(ctx, adm, cfg.Group, in.ranges, cfg.Wait); err != nil {
			return nil, nil, nil, nil, err
		}
		notes = append(notes, more...)
	}
	outTopics := []string{cfg.Output}
	if cfg.DLQ != "" {
		outTopics = append(outTopics, cfg.DLQ)
	}
	if out, err = resolve(ctx, adm, outTopics, Bound{}, Bound{}, true); err != nil {
		return nil, nil, nil, nil, err
	}
	compacted, warnings, err := compactedTopics(ctx, adm, cfg.Inputs, cfg.Principal)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	notes = append(append(notes, in.notes...), out.notes...)
	for _, n := range notes {
		if cfg.Log != nil {
			cfg.Log.Info("verify: " + n)
		}
	}
	for _, w := range warnings {
		if cfg.Log != nil {
			cfg.Log.Warn("verify: " + w)
		}
	}
	return in, out, compacted, append(notes, warnings...), nil
}

func (cfg *Config) validate() error {
	switch {
	case len(cfg.Brokers) == 0:
		return fmt.Errorf("%w: no brokers", ErrRange)
	case len(cfg.Inputs) == 0:
		return fmt.Errorf("%w: no input topic", ErrRange)
	case cfg.Output == "":
		return fmt.Errorf("%w: no output topic", ErrRange)
	case cfg.Format == nil:
		return fmt.Errorf("%w: no value format", ErrRange)
	}
	for _, t := range cfg.Inputs {
		if t == cfg.Output || t == cfg.DLQ {
			return fmt.Errorf("%w: %s is both an input and the output or DLQ", ErrRange, t)
		}
	}
	return nil
}

func (cfg *Config) topics() []string {
	ts := append(append([]string(nil), cfg.Inputs...), cfg.Output)
	if cfg.DLQ != "" {
		ts = append(ts, cfg.DLQ)
	}
	return ts
}

// checkTopics makes a missing topic one clear error.
func checkTopics(ctx context.Context, adm *kadm.Client, topics []string) error {
	td, err := kafkaacl.ListTopics(ctx, adm, topics...)
	if err != nil {
		return fmt.Errorf("verify: describe topics %v: %w", topics, err)
	}
	var missing []string
	for _, t := range topics {
		d, ok := td[t]
		if ok && kafkaacl.Is(d.Err) {
			return kafkaacl.Classify(fmt.Errorf("verify: describe topic %s: %w", t, d.Err), "Metadata",
				kafkaacl.Target{Type: kafkaacl.Topic, Name: t, Operation: "READ"})
		}
		if !ok || d.Err != nil {
			missing = append(missing, t)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %s does not exist (or cannot be described)", ErrTopic, strings.Join(missing, ", "))
	}
	return nil
}

// compactedTopics says which topics are compacted: in those, an offset
// that is neither a record nor a marker was removed by compaction (or held
// an aborted record) and is not checkable. A topic whose configs the
// principal may not read (no DESCRIBE_CONFIGS) is taken as not compacted,
// with a warning that says what that costs: the verdict stands (an output
// record naming a removed offset is still unattributed), but offsets that
// compaction removed are in no count.
func compactedTopics(ctx context.Context, adm *kadm.Client, topics []string, principal string) (map[string]bool, []string, error) {
	out := map[string]bool{}
	var warnings []string
	refused := func(topic string, err error) {
		e := kafkaacl.WithPrincipal(kafkaacl.Classify(err, "DescribeConfigs",
			kafkaacl.Target{Type: kafkaacl.Topic, Name: topic, Operation: "DESCRIBE_CONFIGS"}), principal)
		warnings = append(warnings, fmt.Sprintf("cannot tell whether input topic %s is compacted, taken as not compacted: "+
			"if it is, the offsets compaction removed are counted nowhere (not_checkable is short by them); %v", topic, e))
	}
	// One request a topic: kadm makes one topic's refusal the error of the
	// whole call.
	for _, t := range topics {
		rcs, err := adm.DescribeTopicConfigs(ctx, t)
		if kafkaacl.Is(err) {
			refused(t, err)
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("verify: describe configs of %s: %w", t, err)
		}
		for _, rc := range rcs {
			if rc.Err != nil {
				return nil, nil, fmt.Errorf("verify: describe configs of %s: %w", t, rc.Err)
			}
			for _, c := range rc.Configs {
				if c.Key == "cleanup.policy" && c.Value != nil && strings.Contains(*c.Value, "compact") {
					out[rc.Name] = true
				}
			}
		}
	}
	return out, warnings, nil
}

// countCompacted counts the gaps of a compacted topic's range.
func (l *Ledger) countCompacted(rg Range) {
	p, _, ok := l.slot(Coord{rg.Topic, rg.Partition, rg.From})
	if !ok {
		return
	}
	for i := range int64(len(p.out)) {
		if !bit(p.rec, i) && !bit(p.marker, i) {
			l.in.notCheckable++
		}
	}
}

// split deals ranges out to k groups, the larger ranges first, each to the
// group with the least so far.
func split(ranges []Range, k int) [][]Range {
	sorted := append([]Range(nil), ranges...)
	slices.SortFunc(sorted, func(a, b Range) int { return cmp.Compare(b.To-b.From, a.To-a.From) })
	groups := make([][]Range, k)
	load := make([]int64, k)
	for _, r := range sorted {
		i := slices.Index(load, slices.Min(load))
		groups[i] = append(groups[i], r)
		load[i] += r.To - r.From
	}
	return slices.DeleteFunc(groups, func(g []Range) bool { return len(g) == 0 })
}

func span(rs []Range) (n int64) {
	for _, r := range rs {
		n += r.To - r.From
	}
	return n
}

// reader reads ranges into the ledger.
type reader struct {
	cfg     Config
	l       *Ledger
	outMu   sync.Mutex // the output side of l
	total   int64
	done    atomic.Int64 // offsets passed
	records atomic.Int64
}

// read consumes ranges read_committed (keeping transaction markers, so
// that it sees a partition reach its end even when its last offsets are
// markers) and hands every record below its range's end to each, until
// every range is done.
func (r *reader) read(ctx context.Context, ranges []Range, each func(context.Context, *kgo.Record) error) error {
	left := map[string]map[int32]*Range{}
	consume := map[string]map[int32]kgo.Offset{}
	for i := range ranges {
		rg := &ranges[i]
		if rg.From >= rg.To {
			continue
		}
		if left[rg.Topic] == nil {
			left[rg.Topic] = map[int32]*Range{}
			consume[rg.Topic] = map[int32]kgo.Offset{}
		}
		left[rg.Topic][rg.Partition] = rg
		consume[rg.Topic][rg.Partition] = kgo.NewOffset().At(rg.From)
	}
	if len(left) == 0 {
		return nil
	}
	opts := append([]kgo.Opt{kgo.SeedBrokers(r.cfg.Brokers...), kgo.ConsumePartitions(consume),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords(),
		// Small per-partition fetches bound the memory; the response limit
		// is far above their sum, so that a response never fills in the
		// middle of a partition: kfake then leaves that partition's
		// aborted transactions out of the response, and a read_committed
		// client shows their records (seen as renumbered copies on kfake
		// with FetchMaxBytes 2 MiB; Apache Kafka lists them either way).
		kgo.FetchMaxBytes(64 << 20), kgo.FetchMaxPartitionBytes(256 << 10)}, r.cfg.KafkaOpts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("verify: kafka client: %w", err)
	}
	defer cl.Close()
	pos := map[*Range]int64{}
	for len(left) > 0 {
		pctx, cancel := context.WithTimeout(ctx, r.cfg.StallTimeout)
		fs := cl.PollFetches(pctx)
		cancel()
		if err := ctx.Err(); err != nil {
			return err
		}
		if fs.NumRecords() == 0 && pctx.Err() != nil {
			return fmt.Errorf("verify: no record for %s while reading %s", r.cfg.StallTimeout, leftText(left, pos))
		}
		if err := fetchError(fs); err != nil {
			return err
		}
		var ferr error
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			rg := left[p.Topic][p.Partition]
			if rg == nil || ferr != nil {
				return
			}
			for _, rec := range p.Records {
				if rec.Offset >= rg.To {
					break
				}
				if err := each(ctx, rec); err != nil {
					ferr = err
					return
				}
				r.records.Add(1)
				r.advance(pos, rg, rec.Offset+1)
			}
			if last := p.Records; len(last) > 0 && last[len(last)-1].Offset >= rg.To-1 {
				r.advance(pos, rg, rg.To)
				delete(left[p.Topic], p.Partition)
				if len(left[p.Topic]) == 0 {
					delete(left, p.Topic)
				}
				cl.RemoveConsumePartitions(map[string][]int32{p.Topic: {p.Partition}})
			}
		})
		if ferr != nil {
			return ferr
		}
	}
	return nil
}

// advance moves rg's position to next, counting the offsets passed.
func (r *reader) advance(pos map[*Range]int64, rg *Range, next int64) {
	at, ok := pos[rg]
	if !ok {
		at = rg.From
	}
	if next > at {
		r.done.Add(next - at)
		pos[rg] = next
	}
}

// fetchError returns the first error of a fetch that retrying cannot fix.
func fetchError(fs kgo.Fetches) error {
	for _, fe := range fs.Errors() {
		if errors.Is(fe.Err, context.Canceled) || errors.Is(fe.Err, context.DeadlineExceeded) {
			continue
		}
		return kafkaacl.Classify(fmt.Errorf("verify: read %s[%d]: %w", fe.Topic, fe.Partition, fe.Err), "Fetch",
			kafkaacl.Target{Type: kafkaacl.Topic, Name: fe.Topic, Operation: "READ"})
	}
	return nil
}

func leftText(left map[string]map[int32]*Range, pos map[*Range]int64) string {
	var b strings.Builder
	for t, ps := range left {
		for p, rg := range ps {
			at, ok := pos[rg]
			if !ok {
				at = rg.From
			}
			fmt.Fprintf(&b, "%s[%d] at %d of %d..%d; ", t, p, at, rg.From, rg.To)
		}
	}
	return strings.TrimSuffix(b.String(), "; ")
}

// input feeds one input record to the ledger.
func (r *reader) input(ctx context.Context, rec *kgo.Record) error {
	c := Coord{rec.Topic, rec.Partition, rec.Offset}
	if rec.Attrs.IsControl() {
		r.l.Marker(c)
		return nil
	}
	insp, err := r.cfg.Format.Inspect(ctx, rec.Value)
	if err != nil {
		return fmt.Errorf("verify: read input %s: %w", c, err)
	}
	r.l.Input(c, insp.Kind == codec.HasNumber)
	return nil
}

// output feeds one output or DLQ record to the ledger; only the ledger
// call holds the output side's lock.
func (r *reader) output(ctx context.Context, rec *kgo.Record) error {
	return feedCopy(ctx, lockedOut{&r.outMu, r.l}, rec, rec.Topic == r.cfg.DLQ, r.cfg.Format)
}

// copySink is the output side of a Ledger or a Window.
type copySink interface {
	Output(src, at Coord, n int64)
	DeadLetter(src, at Coord)
	Unattributed(at Coord, reason string)
	Invalid(src, at Coord, reason string)
}

// lockedOut is a Ledger's output side under mu.
type lockedOut struct {
	mu *sync.Mutex
	l  *Ledger
}

func (o lockedOut) Output(src, at Coord, n int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.l.Output(src, at, n)
}

func (o lockedOut) DeadLetter(src, at Coord) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.l.DeadLetter(src, at)
}

func (o lockedOut) Unattributed(at Coord, reason string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.l.Unattributed(at, reason)
}

func (o lockedOut) Invalid(src, at Coord, reason string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.l.Invalid(src, at, reason)
}

// feedCopy parses rec, a record of the output topic (or, with dead, of
// the DLQ), and feeds it to s: by its source header, and for an output
// its number, from the number header or else from the value as f reads
// it. A control record is skipped. The parsing runs outside s.
func feedCopy(ctx context.Context, s copySink, rec *kgo.Record, dead bool, f codec.Format) error {
	if rec.Attrs.IsControl() {
		return nil
	}
	at := Coord{rec.Topic, rec.Partition, rec.Offset}
	raw, ok := header(rec, codec.HeaderSource)
	if !ok {
		s.Unattributed(at, "no "+codec.HeaderSource+" header")
		return nil
	}
	t, p, o, err := codec.ParseSource(string(raw))
	if err != nil {
		s.Unattributed(at, fmt.Sprintf("%s header %s is malformed", codec.HeaderSource, strconv.Quote(string(raw))))
		return nil
	}
	src := Coord{t, p, o}
	if dead {
		s.DeadLetter(src, at)
		return nil
	}
	var n int64
	if h, ok := header(rec, codec.HeaderNumber); ok {
		if n, err = codec.ParseNumber(h); err != nil {
			s.Invalid(src, at, fmt.Sprintf("%s header %s: %v", codec.HeaderNumber, strconv.Quote(string(h)), err))
			return nil
		}
	} else {
		n, ok, err = f.Number(ctx, rec.Value)
		if err != nil {
			return fmt.Errorf("verify: read output %s: %w", at, err)
		}
		if !ok {
			s.Invalid(src, at, "no "+codec.HeaderNumber+" header and no valid number in the value")
			return nil
		}
	}
	s.Output(src, at, n)
	return nil
}

// header returns the value of the last header named key, as the worker
// and the audit read it.
func header(r *kgo.Record, key string) ([]byte, bool) {
	return codec.LastHeader(r.Headers, key)
}

// reportProgress calls cfg.Progress every 200ms until the returned stop is
// called, and once more then.
func (r *reader) reportProgress(ctx context.Context) (stop func()) {
	if r.cfg.Progress == nil {
		return func() {}
	}
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			r.cfg.Progress(r.done.Load(), r.total)
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() {
		close(done)
		<-ended
		r.cfg.Progress(r.done.Load(), r.total)
	}
}

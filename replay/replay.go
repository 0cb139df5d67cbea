package replay

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/flakestream/flakestream/eos"
	"github.com/flakestream/flakestream/idgen"
	"github.com/flakestream/flakestream/pipeline"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ErrBound is a --from or --to that cannot be read or does not fit.
var ErrBound = errors.New("pipeline: invalid replay bound")

// Bound is one end of a replay range: the start or end of each partition,
// the first offset at or after a time, or explicit partition offsets.
type Bound struct {
	Edge string    // "start" or "end", or "" for Time or Offsets
	Time time.Time // the first record at or after it
	// Offsets are explicit. A partition that neither bound lists is left
	// out of the replay, unless Config.AllPartitions; then it takes the
	// edge (the start for From, the end for To).
	Offsets map[int32]int64
	text    string
}

func (b Bound) String() string { return b.text }

// ParseBound parses "start", "end", an RFC 3339 time, or "p:o,p:o,...".
func ParseBound(s string) (Bound, error) {
	switch s {
	case "start", "end":
		return Bound{Edge: s, text: s}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return Bound{Time: t, text: s}, nil
	}
	b := Bound{Offsets: map[int32]int64{}, text: s}
	for _, part := range strings.Split(s, ",") {
		ps, os, ok := strings.Cut(strings.TrimSpace(part), ":")
		p, err1 := strconv.ParseInt(ps, 10, 32)
		o, err2 := strconv.ParseInt(os, 10, 64)
		if !ok || err1 != nil || err2 != nil || p < 0 || o < 0 {
			return Bound{}, fmt.Errorf("%w: %q: want start, end, an RFC 3339 time, or partition:offset pairs", ErrBound, s)
		}
		if _, dup := b.Offsets[int32(p)]; dup {
			return Bound{}, fmt.Errorf("%w: %q names partition %d twice", ErrBound, s, p)
		}
		b.Offsets[int32(p)] = o
	}
	return b, nil
}

// Config is one bounded replay of Input[From, To) into Output.
type Config struct {
	// Loop is the loop's settings (brokers, Kafka options, logger,
	// metrics, timeouts). The replay sets Topics, Group and
	// TransactionalID itself.
	Loop     eos.Config
	Input    string
	Output   string
	From, To Bound
	// AllPartitions replays every partition of Input even when From or To
	// lists partition offsets; a partition neither lists then runs from
	// its start or to its end. Without it, only the listed partitions are
	// replayed.
	AllPartitions bool
	// ID names the replay: its consumer group is flakestream-replay-<ID>
	// and so is its transactional ID. "" derives it from the input, output
	// and bounds, so running the same command again resumes.
	ID string
	// Redis keeps the offsets "end" and times resolved to on the first run,
	// so that a resumed replay stops where the first run meant to.
	Redis       redis.Cmdable
	RedisPrefix string
	// Worker options: numbers, codec, idempotency. The replay sets the
	// output topic and the bound itself.
	Worker []pipeline.Opt
	// Progress is called after every committed transaction (and once at
	// the start) with the records done and the total of the range.
	Progress func(done, total int64)
}

// Range is the resolved range of one partition: offsets [From, To).
type Range struct {
	From int64 `json:"from"`
	To   int64 `json:"to"`
}

// ID returns the default ID of a replay: a hash of what it replays (the
// topics, the bounds as given, and AllPartitions where it changes the
// range).
func ID(rc Config) string {
	text := rc.Input + "\x00" + rc.Output + "\x00" + rc.From.text + "\x00" + rc.To.text
	if rc.AllPartitions && len(rc.From.Offsets)+len(rc.To.Offsets) > 0 {
		text += "\x00all-partitions"
	}
	sum := sha256.Sum256([]byte(text))
	return hex.EncodeToString(sum[:6])
}

// named is the set of partitions a replay covers when its bounds list
// partition offsets and AllPartitions is off; nil when it covers every
// partition.
func (rc Config) named() map[int32]bool {
	if rc.AllPartitions || len(rc.From.Offsets)+len(rc.To.Offsets) == 0 {
		return nil
	}
	named := map[int32]bool{}
	for p := range rc.From.Offsets {
		named[p] = true
	}
	for p := range rc.To.Offsets {
		named[p] = true
	}
	return named
}

// Run runs a bounded, exactly-once, resumable replay. It reads the input
// with a consumer group of its own (so the live worker's offsets are never
// touched), produces like the worker, and returns once every partition has
// reached its bound, including a bound that falls on transaction markers,
// which consumers never see as records. Killed and run again with the same
// arguments, it continues from its last committed transaction.
func Run(ctx context.Context, rc Config) (map[int32]Range, error) {
	adm, edges, err := openInput(ctx, &rc)
	if err != nil {
		return nil, err
	}
	defer adm.Close()
	group := Group(rc.ID)
	ranges, err := resolveRanges(ctx, adm, edges, rc, true)
	if err != nil {
		return nil, err
	}
	stop, skip := stops(ranges, edges.end[rc.Input])
	var total int64
	for _, r := range ranges {
		total += r.To - r.From
	}
	committed, err := seedGroup(ctx, adm, group, rc.Input, ranges, skip)
	if err != nil {
		return nil, err
	}
	done := func(offs map[int32]int64) (int64, bool) { return progressOf(ranges, offs) }
	n, finished := done(committed)
	if rc.Progress != nil {
		rc.Progress(n, total)
	}
	if finished {
		return ranges, nil
	}
	opts := append([]pipeline.Opt{}, rc.Worker...)
	opts = append(opts, pipeline.OutputTopic(rc.Output),
		pipeline.Bounded(map[string]map[int32]int64{rc.Input: stop}, func(offs map[string]map[int32]kgo.EpochOffset) bool {
			flat := map[int32]int64{}
			for p, eo := range offs[rc.Input] {
				flat[p] = eo.Offset
			}
			n, all := done(flat)
			if rc.Progress != nil {
				rc.Progress(n, total)
			}
			return all
		}))
	s := rc.Loop
	s.Topics, s.Group, s.TransactionalID = []string{rc.Input}, group, group
	w, err := pipeline.NewWorker(s, opts...)
	if err != nil {
		return nil, err
	}
	if err := w.Run(ctx); err != nil {
		return ranges, err
	}
	if ctx.Err() != nil {
		return ranges, ctx.Err()
	}
	return ranges, nil
}

// stops are where the worker stops numbering each partition: at the end of
// its range, or at 0 for a partition the replay leaves out; skip is where
// the group starts reading the partitions left out, their end, so they are
// not read from the start and nothing that arrives in them is numbered.
func stops(ranges map[int32]Range, ends map[int32]kadm.ListedOffset) (stop, skip map[int32]int64) {
	stop, skip = map[int32]int64{}, map[int32]int64{}
	for p, r := range ranges {
		stop[p] = r.To
	}
	for p, end := range ends {
		if _, ok := ranges[p]; !ok {
			skip[p] = end.Offset
			stop[p] = 0
		}
	}
	return stop, skip
}

// progressOf is how many offsets of ranges the committed offsets offs
// cover, and whether they cover all of them.
func progressOf(ranges map[int32]Range, offs map[int32]int64) (n int64, all bool) {
	all = true
	for p, r := range ranges {
		o, ok := offs[p]
		if !ok {
			o = r.From
		}
		n += min(max(o, r.From), r.To) - r.From
		if o < r.To {
			all = false
		}
	}
	return n, all
}

// Group is the consumer group, and transactional ID, of the replay named
// id.
func Group(id string) string { return "flakestream-replay-" + id }

// resolveRanges turns the bounds into offsets, once: the first run stores
// them in Redis (if store) and every resumed run reads them back, so "end"
// stays the high watermarks of the first start. Only the partitions the
// replay covers have a range.
func resolveRanges(ctx context.Context, adm *kadm.Client, edges *edges, rc Config, store bool) (map[int32]Range, error) {
	key := idgen.ReplayKey(rc.RedisPrefix, rc.ID)
	if ranges, err := storedRanges(ctx, rc); err != nil || ranges != nil {
		return ranges, err
	}
	from, err := edges.at(ctx, adm, rc.From, "start")
	if err != nil {
		return nil, err
	}
	to, err := edges.at(ctx, adm, rc.To, "end")
	if err != nil {
		return nil, err
	}
	ranges := map[int32]Range{}
	named := rc.named()
	for p := range from {
		if named != nil && !named[p] {
			continue
		}
		if from[p] > to[p] {
			return nil, fmt.Errorf("%w: partition %d: --from %s is offset %d, after --to %s at %d", ErrBound, p, rc.From.text, from[p], rc.To.text, to[p])
		}
		ranges[p] = Range{From: from[p], To: to[p]}
	}
	if rc.Redis != nil && store {
		b, _ := json.Marshal(ranges)
		if err := rc.Redis.SetNX(ctx, key, b, 30*24*time.Hour).Err(); err != nil {
			return nil, fmt.Errorf("store replay bounds in redis: %w", err)
		}
		// Another run may have stored its bounds first: use those.
		if b, err := rc.Redis.Get(ctx, key).Bytes(); err == nil {
			_ = json.Unmarshal(b, &ranges)
		}
	}
	return ranges, nil
}

// storedRanges are the ranges an earlier run of the replay kept in Redis,
// or nil.
func storedRanges(ctx context.Context, rc Config) (map[int32]Range, error) {
	if rc.Redis == nil {
		return nil, nil
	}
	b, err := rc.Redis.Get(ctx, idgen.ReplayKey(rc.RedisPrefix, rc.ID)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read replay bounds from redis: %w", err)
	}
	var ranges map[int32]Range
	if err := json.Unmarshal(b, &ranges); err != nil {
		return nil, nil // unreadable: resolved again, as before
	}
	return ranges, nil
}

// edges are a topic's start and end offsets.
type edges struct {
	topic       string
	starts, end kadm.ListedOffsets
}

// openInput names the replay (rc.ID, from its arguments when unset),
// opens its admin client, which the caller closes, and lists the input's
// edges.
func openInput(ctx context.Context, rc *Config) (*kadm.Client, *edges, error) {
	if rc.ID == "" {
		rc.ID = ID(*rc)
	}
	cl, err := rc.Loop.NewClient()
	if err != nil {
		return nil, nil, fmt.Errorf("%w: kafka client: %w", eos.ErrFatal, err)
	}
	adm := kadm.NewClient(cl)
	e, err := listEdges(ctx, adm, rc.Input)
	if err != nil {
		adm.Close()
		return nil, nil, err
	}
	return adm, e, nil
}

// listEdges lists topic's start and end offsets.
func listEdges(ctx context.Context, adm *kadm.Client, topic string) (*edges, error) {
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("%w: start offsets of %s: %w", eos.ErrFatal, topic, err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("%w: end offsets of %s: %w", eos.ErrFatal, topic, err)
	}
	return &edges{topic: topic, starts: starts, end: ends}, nil
}

// at resolves bound b to an offset per partition, within the topic's
// edges; a partition that b's offsets leave out takes edge ("start" or
// "end").
func (e *edges) at(ctx context.Context, adm *kadm.Client, b Bound, edge string) (map[int32]int64, error) {
	out := map[int32]int64{}
	var timed kadm.ListedOffsets
	if !b.Time.IsZero() {
		var err error
		if timed, err = adm.ListOffsetsAfterMilli(ctx, b.Time.UnixMilli(), e.topic); err == nil {
			err = timed.Error()
		}
		if err != nil {
			return nil, fmt.Errorf("%w: offsets of %s after %s: %w", eos.ErrFatal, e.topic, b.text, err)
		}
	}
	for p, s := range e.starts[e.topic] {
		end := e.end[e.topic][p].Offset
		switch {
		case b.Edge == "start":
			out[p] = s.Offset
		case b.Edge == "end":
			out[p] = end
		case !b.Time.IsZero():
			out[p] = timed[e.topic][p].Offset
		default:
			o, ok := b.Offsets[p]
			switch {
			case !ok && edge == "start":
				o = s.Offset
			case !ok:
				o = end
			}
			out[p] = min(max(o, s.Offset), end)
		}
	}
	for p := range b.Offsets {
		if _, ok := e.starts[e.topic][p]; !ok {
			return nil, fmt.Errorf("%w: %s has no partition %d", ErrBound, e.topic, p)
		}
	}
	return out, nil
}

// groupOffsets are the committed offsets of topic in a replay group, none
// for a group that does not exist yet.
func groupOffsets(ctx context.Context, adm *kadm.Client, group, topic string) (map[int32]int64, error) {
	var fetched kadm.OffsetResponses
	var err error
	// A broker that has just started may not have its group coordinator
	// yet; that passes within seconds.
	for attempt := 0; ; attempt++ {
		if fetched, err = adm.FetchOffsets(ctx, group); err == nil {
			err = fetched.Error()
		}
		if err == nil || !kerr.IsRetriable(err) || attempt == 20 || eos.Sleep(ctx, 250*time.Millisecond) != nil {
			break
		}
	}
	if errors.Is(err, kerr.GroupIDNotFound) {
		err = nil // a new replay
	}
	if err != nil {
		return nil, fmt.Errorf("%w: offsets of replay group %s: %w", eos.ErrFatal, group, err)
	}
	have := map[int32]int64{}
	fetched.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic && o.Err == nil && o.At >= 0 {
			have[o.Partition] = o.At
		}
	})
	return have, nil
}

// seedGroup commits the range starts for a replay group that has no
// offsets yet, so the replay starts at --from, and the end offsets in skip
// for the partitions it leaves out, so they are not read from the start; a
// group that has offsets (a resumed replay) keeps them. It returns the
// group's offsets.
func seedGroup(ctx context.Context, adm *kadm.Client, group, topic string, ranges map[int32]Range, skip map[int32]int64) (map[int32]int64, error) {
	have, err := groupOffsets(ctx, adm, group, topic)
	if err != nil || len(have) > 0 {
		return have, err
	}
	at := map[int32]int64{}
	for p, o := range skip {
		at[p] = o
	}
	for p, r := range ranges {
		at[p] = r.From
		have[p] = r.From
	}
	var seed kadm.Offsets
	parts := make([]int32, 0, len(at))
	for p := range at {
		parts = append(parts, p)
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	for _, p := range parts {
		seed.Add(kadm.Offset{Topic: topic, Partition: p, At: at[p], LeaderEpoch: -1})
	}
	resp, err := adm.CommitOffsets(ctx, group, seed)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("%w: seed replay group %s: %w", eos.ErrFatal, group, err)
	}
	return have, nil
}

package verify

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/flakestream/flakestream/internal/kafkaacl"
	"github.com/twmb/franz-go/pkg/kadm"
)

// Bound is one end of the input range: the zero Bound is the edge (the log
// start, or the last stable offset at the start of the check); else the
// first offset at or after Time, or explicit Offsets.
type Bound struct {
	Time time.Time
	// Offsets by topic, then partition; topic "" applies to every input
	// topic. A partition neither bound lists is left out of the range,
	// unless Config.AllPartitions; then it takes the edge.
	Offsets map[string]map[int32]int64
}

// IsZero reports whether b is the edge.
func (b Bound) IsZero() bool { return b.Time.IsZero() && len(b.Offsets) == 0 }

// ParseBound parses the --from and --to of `flakestream verify` (and of
// replay): "start" or "end" (the edge), an RFC 3339 time, or offsets as
// ParseOffsets takes them.
func ParseBound(s string) (Bound, error) {
	switch s {
	case "", "start", "end":
		return Bound{}, nil
	}
	if b, err := ParseTime(s); err == nil {
		return b, nil
	}
	if b, err := ParseOffsets(s); err == nil {
		return b, nil
	}
	return Bound{}, fmt.Errorf("%w: %q: want start, end, an RFC 3339 time, or partition:offset pairs", ErrRange, s)
}

// ParseTime parses an RFC 3339 time as a Bound.
func ParseTime(s string) (Bound, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return Bound{}, fmt.Errorf("%w: %q is not an RFC 3339 time (2026-12-01T00:00:00Z)", ErrRange, s)
	}
	return Bound{Time: t}, nil
}

// ParseOffsets parses "P:O,P:O,..." (for every input topic) and
// "TOPIC:P:O" (for one) as a Bound.
func ParseOffsets(s string) (Bound, error) {
	b := Bound{Offsets: map[string]map[int32]int64{}}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		var topic string
		if i := strings.LastIndexByte(item, ':'); i > 0 {
			if j := strings.LastIndexByte(item[:i], ':'); j >= 0 {
				topic, item = item[:j], item[j+1:]
			}
		}
		ps, os, ok := strings.Cut(item, ":")
		p, err1 := strconv.ParseInt(ps, 10, 32)
		o, err2 := strconv.ParseInt(os, 10, 64)
		if !ok || err1 != nil || err2 != nil || p < 0 || o < 0 {
			return Bound{}, fmt.Errorf("%w: %q: want partition:offset pairs (or topic:partition:offset), comma-separated", ErrRange, s)
		}
		m := b.Offsets[topic]
		if m == nil {
			m = map[int32]int64{}
			b.Offsets[topic] = m
		}
		if _, dup := m[int32(p)]; dup {
			return Bound{}, fmt.Errorf("%w: %q names partition %d twice", ErrRange, s, p)
		}
		m[int32(p)] = o
	}
	return b, nil
}

// lists reports whether b lists an offset for partition p of topic t
// (under t or under "", every input topic).
func (b Bound) lists(t string, p int32) bool {
	_, ok := b.Offsets[t][p]
	_, all := b.Offsets[""][p]
	return ok || all
}

// offsets is one topic's offset per partition.
type offsets map[int32]int64

// resolved is the input range as it will be read, with what was clamped.
type resolved struct {
	ranges       []Range
	committed    map[string]map[int32]int64 // the worker group's, for pending
	notCheckable int64
	notes        []string
	compacted    map[string]bool
}

// resolve turns the bounds into ranges of the input topics: from the log
// start (or from) to the last stable offset (or to). A from below the log
// start is raised to it, and the offsets in between are not checkable; a to
// beyond the last stable offset is lowered to it, with a note. Unless all,
// bounds that list partition offsets cover only the partitions they list.
func resolve(ctx context.Context, adm *kadm.Client, topics []string, from, to Bound, all bool) (*resolved, error) {
	starts, err := listed(adm.ListStartOffsets(ctx, topics...))
	if err != nil {
		return nil, fmt.Errorf("verify: start offsets of %v: %w", topics, err)
	}
	ends, err := listed(adm.ListCommittedOffsets(ctx, topics...))
	if err != nil {
		return nil, fmt.Errorf("verify: last stable offsets of %v: %w", topics, err)
	}
	fromOffs, err := at(ctx, adm, topics, from, starts)
	if err != nil {
		return nil, err
	}
	toOffs, err := at(ctx, adm, topics, to, ends)
	if err != nil {
		return nil, err
	}
	res := &resolved{compacted: map[string]bool{}}
	covered := func(string, int32) bool { return true }
	if !all && len(from.Offsets)+len(to.Offsets) > 0 {
		covered = func(t string, p int32) bool { return from.lists(t, p) || to.lists(t, p) }
	}
	for _, t := range topics {
		for p := int32(0); p < int32(len(starts[t])); p++ {
			if !covered(t, p) {
				continue
			}
			start, end := starts[t][p], ends[t][p]
			f, e := fromOffs[t][p], toOffs[t][p]
			if f > e {
				return nil, fmt.Errorf("%w: %s[%d]: the range starts at offset %d, after its end %d", ErrRange, t, p, f, e)
			}
			if e > end {
				if len(to.Offsets) > 0 {
					res.notes = append(res.notes, fmt.Sprintf("%s[%d]: end %d is past the last stable offset %d; checked to %d", t, p, e, end, end))
				}
				e = end
			}
			if f < start {
				gone := min(start, e) - f
				res.notCheckable += gone
				res.notes = append(res.notes, fmt.Sprintf("%s[%d]: offsets %d..%d are gone (the log starts at %d): %d not checkable", t, p, f, min(start, e)-1, start, gone))
				f = min(start, e)
			}
			res.ranges = append(res.ranges, Range{Topic: t, Partition: p, From: f, To: max(e, f)})
		}
	}
	return res, nil
}

// listed checks a kadm offset listing: every topic must exist.
func listed(l kadm.ListedOffsets, err error) (map[string]offsets, error) {
	if err != nil {
		return nil, err
	}
	out := map[string]offsets{}
	var errs []error
	l.Each(func(o kadm.ListedOffset) {
		if kafkaacl.Is(o.Err) {
			errs = append(errs, kafkaacl.Classify(fmt.Errorf("verify: list offsets of %s: %w", o.Topic, o.Err), "ListOffsets",
				kafkaacl.Target{Type: kafkaacl.Topic, Name: o.Topic, Operation: "READ"}))
			return
		}
		if o.Err != nil {
			errs = append(errs, fmt.Errorf("%w: %s: %w", ErrTopic, o.Topic, o.Err))
			return
		}
		if out[o.Topic] == nil {
			out[o.Topic] = offsets{}
		}
		out[o.Topic][o.Partition] = o.Offset
	})
	return out, errors.Join(errs...)
}

// at resolves b for every partition of topics; edge holds the default.
func at(ctx context.Context, adm *kadm.Client, topics []string, b Bound, edge map[string]offsets) (map[string]offsets, error) {
	out := map[string]offsets{}
	for _, t := range topics {
		out[t] = offsets{}
		for p, o := range edge[t] {
			out[t][p] = o
		}
	}
	switch {
	case !b.Time.IsZero():
		l, err := listed(adm.ListOffsetsAfterMilli(ctx, b.Time.UnixMilli(), topics...))
		if err != nil {
			return nil, fmt.Errorf("verify: offsets at %s: %w", b.Time.Format(time.RFC3339), err)
		}
		return l, nil
	case len(b.Offsets) > 0:
		for topic, m := range b.Offsets {
			named := topics
			if topic != "" {
				if _, ok := out[topic]; !ok {
					return nil, fmt.Errorf("%w: offsets name topic %q, which is not an input topic", ErrRange, topic)
				}
				named = []string{topic}
			}
			for _, t := range named {
				for p, o := range m {
					if _, ok := out[t][p]; !ok {
						return nil, fmt.Errorf("%w: %s has no partition %d (it has %d)", ErrRange, t, p, len(out[t]))
					}
					out[t][p] = o
				}
			}
		}
	}
	return out, nil
}

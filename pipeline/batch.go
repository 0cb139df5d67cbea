package pipeline

import (
	"context"
	"strconv"

	"github.com/flakestream/flakestream/codec"
	"github.com/twmb/franz-go/pkg/kgo"
)

// counts is what one batch did with its records. in = numbered + passthrough
// + dlq, always: every record has exactly one fate.
type counts struct {
	in, numbered, passthrough, dlq, repeats, dropped int
	dlqByClass                                       map[codec.Class]int
}

func (c *counts) add(o counts) {
	c.in += o.in
	c.numbered += o.numbered
	c.passthrough += o.passthrough
	c.dlq += o.dlq
	c.repeats += o.repeats
	c.dropped += o.dropped
}

// batch turns one poll's records into the records of one transaction. Its
// memory (values, headers, records) is reused from one transaction to the
// next, so the hot path allocates only when a batch is larger than any
// before it.
type batch struct {
	cfg *cfg

	in    []*kgo.Record
	insp  []codec.Inspection
	ids   []int64
	arena []byte
	hdrs  []kgo.RecordHeader
	recs  []kgo.Record
	out   []*kgo.Record

	outParts, dlqParts int32
	counts             counts
}

// reset prepares the batch for the records of one poll.
func (b *batch) reset(fetches kgo.Fetches) {
	b.in = b.in[:0]
	fetches.EachRecord(func(r *kgo.Record) { b.in = append(b.in, r) })
	b.insp = grow(b.insp, len(b.in))
	b.recs = grow(b.recs, len(b.in))
	b.out = b.out[:0]
	b.counts = counts{in: len(b.in)}
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// prepare inspects every record, reserves the numbers the batch needs in as
// few sequencer round trips as the layout allows, and builds the output
// records. Records are numbered in fetch order, so the numbers of each input
// partition increase in offset order. On error nothing of the batch may be
// produced; the caller aborts the transaction.
func (b *batch) prepare(ctx context.Context) error {
	if !b.cfg.numbering {
		b.copyThrough()
		return nil
	}
	// Pass 1: classify, and size the arenas so that pass 2 never
	// reallocates under records that already point into them.
	need, bytes, headers := 0, 0, 0
	for i, r := range b.in {
		in := b.cfg.codec.Inspect(r.Value)
		b.insp[i] = in
		headers += len(r.Headers) + 3
		bytes += len(r.Topic) + 2*20 + 2
		switch in.Kind {
		case codec.NeedsNumber:
			need++
			bytes += b.cfg.codec.NumberedLen(r.Value, in, 1<<62) + 20
		case codec.HasNumber:
			bytes += 20
		default:
			bytes += 256
		}
	}
	var err error
	b.ids = b.ids[:0]
	if need > 0 {
		if b.ids, err = b.cfg.numberer.AppendN(ctx, b.ids, need); err != nil {
			return err
		}
	}
	if cap(b.arena) < bytes {
		b.arena = make([]byte, 0, bytes+bytes/4)
	}
	if cap(b.hdrs) < headers {
		b.hdrs = make([]kgo.RecordHeader, 0, headers+headers/4)
	}
	b.arena, b.hdrs = b.arena[:0], b.hdrs[:0]

	// Pass 2: build the records of the transaction.
	next := 0
	for i, r := range b.in {
		in := b.insp[i]
		switch in.Kind {
		case codec.NeedsNumber:
			id := b.ids[next]
			next++
			start := len(b.arena)
			b.arena = b.cfg.codec.AppendNumbered(b.arena, r.Value, in, id)
			b.emit(i, r, b.cfg.output, b.outParts, b.arena[start:len(b.arena):len(b.arena)], id)
			b.counts.numbered++
		case codec.HasNumber:
			// Passed through byte for byte; the headers say so too.
			b.emit(i, r, b.cfg.output, b.outParts, r.Value, in.Number)
			b.counts.passthrough++
		default:
			b.deadLetter(i, r, in)
		}
	}
	return nil
}

// emit appends the output record for input i, with value and the number and
// source headers added to the input's headers. Key, headers and timestamp
// are kept.
func (b *batch) emit(i int, r *kgo.Record, topic string, parts int32, value []byte, id int64) {
	h := len(b.hdrs)
	b.hdrs = append(b.hdrs, r.Headers...)
	start := len(b.arena)
	b.arena = strconv.AppendInt(b.arena, id, 10)
	num := b.arena[start:len(b.arena):len(b.arena)]
	b.hdrs = append(b.hdrs, kgo.RecordHeader{Key: codec.HeaderNumber, Value: num}, b.sourceHeader(r))
	b.add(i, r, topic, parts, value, b.hdrs[h:len(b.hdrs):len(b.hdrs)])
}

// deadLetter appends the DLQ record for input i: its bytes untouched, with
// headers that say why and where it came from.
func (b *batch) deadLetter(i int, r *kgo.Record, in codec.Inspection) {
	h := len(b.hdrs)
	b.hdrs = append(b.hdrs, r.Headers...)
	class := string(in.Class())
	msg := in.Err().Error()
	b.hdrs = append(b.hdrs,
		kgo.RecordHeader{Key: codec.HeaderErrorClass, Value: []byte(class)},
		kgo.RecordHeader{Key: codec.HeaderError, Value: []byte(msg)},
		b.sourceHeader(r))
	b.add(i, r, b.cfg.dlq, b.dlqParts, r.Value, b.hdrs[h:len(b.hdrs):len(b.hdrs)])
	b.counts.dlq++
	if b.counts.dlqByClass == nil {
		b.counts.dlqByClass = make(map[codec.Class]int)
	}
	b.counts.dlqByClass[in.Class()]++
}

func (b *batch) sourceHeader(r *kgo.Record) kgo.RecordHeader {
	start := len(b.arena)
	b.arena = codec.AppendSource(b.arena, r.Topic, r.Partition, r.Offset)
	return kgo.RecordHeader{Key: codec.HeaderSource, Value: b.arena[start:len(b.arena):len(b.arena)]}
}

// add fills output record i. Input partition p goes to output partition
// p mod the output's partition count, so one input partition's records
// stay in one output partition, in order.
func (b *batch) add(i int, r *kgo.Record, topic string, parts int32, value []byte, headers []kgo.RecordHeader) {
	b.recs[i] = kgo.Record{
		Key:       r.Key,
		Value:     value,
		Headers:   headers,
		Timestamp: r.Timestamp,
		Topic:     topic,
		Partition: r.Partition % parts,
	}
	b.out = append(b.out, &b.recs[i])
}

// copyThrough is the loop without numbering: the ceiling a broker and
// machine allow, for the bench command.
func (b *batch) copyThrough() {
	for i, r := range b.in {
		b.add(i, r, b.cfg.output, b.outParts, r.Value, r.Headers)
		b.counts.passthrough++
	}
}

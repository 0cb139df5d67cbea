package audit

import (
	"strconv"

	"github.com/flakestream/flakestream/codec"
	"github.com/twmb/franz-go/pkg/kgo"
)

// auditBatch turns one poll's records into audit records. Its memory is
// reused from one batch to the next.
type auditBatch struct {
	in     []*kgo.Record
	recs   []codec.AuditRecord
	sets   []anomalies
	arena  []byte
	spans  [][4]int // key and value bounds in arena, per audit record
	values [][]byte
	src    []*kgo.Record // the numbered record of each audit record
	krecs  []kgo.Record
	out    []*kgo.Record
}

func (b *auditBatch) reset(fetches kgo.Fetches) {
	b.in = b.in[:0]
	fetches.EachRecord(func(r *kgo.Record) { b.in = append(b.in, r) })
}

// build audits the batch's records in fetch order (so each partition's
// records in offset order) and, when topic is set, builds the audit topic's
// records: key the number in decimal (the source, or the record's own
// location, when there is none), value the audit record's JSON, partition
// the numbered partition mod parts, timestamp the numbered record's.
func (b *auditBatch) build(d *detector, topic string, parts int32) {
	b.recs, b.sets, b.spans = b.recs[:0], b.sets[:0], b.spans[:0]
	b.arena, b.values, b.out, b.src = b.arena[:0], b.values[:0], b.out[:0], b.src[:0]
	for _, r := range b.in {
		rec, set, skip := d.audit(r)
		if skip {
			continue
		}
		b.recs = append(b.recs, rec)
		b.sets = append(b.sets, set)
		b.src = append(b.src, r)
		var sp [4]int
		sp[0] = len(b.arena)
		switch {
		case rec.Valid:
			b.arena = strconv.AppendInt(b.arena, rec.ID, 10)
		case rec.Source != "":
			b.arena = append(b.arena, rec.Source...)
		default:
			b.arena = codec.AppendSource(b.arena, r.Topic, r.Partition, r.Offset)
		}
		sp[1], sp[2] = len(b.arena), len(b.arena)
		b.arena = rec.AppendJSON(b.arena)
		sp[3] = len(b.arena)
		b.spans = append(b.spans, sp)
	}
	// Slices into the arena are taken once it has stopped growing.
	if cap(b.krecs) < len(b.recs) {
		b.krecs = make([]kgo.Record, len(b.recs))
	}
	b.krecs = b.krecs[:len(b.recs)]
	for i, sp := range b.spans {
		value := b.arena[sp[2]:sp[3]:sp[3]]
		b.values = append(b.values, value)
		if topic == "" {
			continue
		}
		r := b.src[i]
		b.krecs[i] = kgo.Record{Topic: topic, Partition: r.Partition % parts, Key: b.arena[sp[0]:sp[1]:sp[1]],
			Value: value, Timestamp: r.Timestamp}
		b.out = append(b.out, &b.krecs[i])
	}
}

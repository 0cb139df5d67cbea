package pipeline

import (
	"strconv"

	"github.com/flakestream/flakestream/codec"
	"github.com/twmb/franz-go/pkg/kgo"
)

// refKeyBytes is the longest input key a reference record keeps.
const refKeyBytes = 256

// maxRefErrorBytes bounds the error text of a reference record.
const maxRefErrorBytes = 512

// source sets b.src to the source of r ("topic/partition/offset"), the
// name the rejecter knows it by, and returns it.
func (b *shard) source(r *kgo.Record) []byte {
	if !b.b.rejecter.active.Load() {
		return nil // never looked at
	}
	b.src = codec.AppendSource(b.src[:0], r.Topic, r.Partition, r.Offset)
	return b.src
}

// fitsOutput reports whether output record i fits the output topic. If
// not, input r goes to the DLQ instead (class output_too_large): the
// number it was given is a gap.
func (b *shard) fitsOutput(i int, r *kgo.Record) bool {
	if batchBytesAtMost(&b.recs[i]) <= b.b.outMax {
		return true
	}
	n := batchBytes(&b.recs[i])
	if n <= b.b.outMax {
		return true
	}
	b.deadLetterClass(i, r, codec.ClassOutputTooLarge, "output record of "+strconv.Itoa(n)+" bytes is over the output topic's limit of "+
		strconv.Itoa(b.b.outMax)+" (its max.message.bytes, or --max-produce-bytes)")
	return false
}

// send hands record i (of input r) to the producer. A dead letter that
// would not fit the DLQ, or whose full copy the DLQ refused before,
// becomes a reference record first. A record that was refused before is
// produced alone, and its refusal ends the attempt.
func (b *shard) send(i int, r *kgo.Record, fate refusal, produce func(*kgo.Record)) error {
	rec := &b.recs[i]
	if rec.Topic == b.b.cfg.dlq && (fate >= referenced || batchBytes(rec) > b.b.dlqMax) {
		b.reference(i, r)
	}
	if fate == unrefused {
		produce(rec)
		return nil
	}
	return b.b.alone(rec)
}

// reference replaces dead letter i (of input r) by a reference record: a
// small JSON value that names the input, its size, its SHA-256 and its
// first bytes, with the dead letter's class, its error and the source. The
// input's headers are left out, and its key if it is long.
func (b *shard) reference(i int, r *kgo.Record) {
	rec := &b.recs[i]
	class := codec.Class(lastHeader(rec, codec.HeaderErrorClass))
	msg := lastHeader(rec, codec.HeaderError) + "; the dead letter of " + strconv.Itoa(batchBytes(rec)) +
		" bytes is over the DLQ's limit of " + strconv.Itoa(b.b.dlqMax) + ", or the DLQ refused it: this is a reference to the input"
	if len(msg) > maxRefErrorBytes {
		msg = msg[:maxRefErrorBytes]
	}
	var key []byte
	if len(r.Key) <= refKeyBytes {
		key = r.Key
	}
	ref := codec.NewReference(r.Topic, r.Partition, r.Offset, r.Key, r.Value, len(r.Headers), class)
	*rec = kgo.Record{
		Key:   key,
		Value: ref.Append(nil),
		Headers: []kgo.RecordHeader{
			{Key: codec.HeaderErrorClass, Value: []byte(class)},
			{Key: codec.HeaderError, Value: []byte(msg)},
			{Key: codec.HeaderSource, Value: codec.AppendSource(nil, r.Topic, r.Partition, r.Offset)},
			{Key: codec.HeaderReference, Value: []byte("true")},
		},
		Timestamp: r.Timestamp,
		Topic:     rec.Topic,
		Partition: rec.Partition,
	}
}

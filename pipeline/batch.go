package pipeline

import (
	"context"
	"slices"
	"sync"

	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/idgen"
	"github.com/twmb/franz-go/pkg/kgo"
)

// counts is what one batch did with its records. in = numbered +
// passthrough + dlq + dropped, always: every record has exactly one fate.
// repeats (records whose idempotency key already had a number) are counted
// among numbered when emitted and among dropped when dropped; renumbered
// records (pre-filled numbers not believed, Trust.Renumber) among numbered.
type counts struct {
	in, numbered, passthrough, dlq, repeats, dropped int
	dlqByClass, renumbered                           map[codec.Class]int
}

// batch turns one poll's records into the records of one transaction. The
// records are split by input partition into shards that are processed in
// parallel: every partition stays in one shard, processed in offset order,
// and each shard takes its numbers in order, so each partition's numbers
// still increase. A shard's memory (values, headers, records) is reused from
// one transaction to the next, so the hot path allocates only when a batch
// is larger than any before it.
type batch struct {
	cfg      *cfg
	numberer Numberer // the configured one, or a prefetcher over it
	shards   []*shard

	outParts, dlqParts int32
	outMax, dlqMax     int // record-batch limits of the output and the DLQ, learnt in Start
	rejecter           *rejecter
	// alone produces a record alone in its record batch and waits for it
	// (for records refused before); set for each transaction.
	alone  func(*kgo.Record) error
	counts counts
}

type shard struct {
	b      *batch
	in     []*kgo.Record
	insp   []codec.Inspection
	why    []codec.Class // per record: why its pre-filled number was replaced, or ""
	ids    []int64
	claim  []int         // per record of the sub-batch: index into claims, noClaim or missingKey
	claims []idgen.Claim // the sub-batch's idempotency claims
	arena  []byte
	hdrs   []kgo.RecordHeader
	recs   []kgo.Record
	src    []byte // scratch: the source of the record at hand

	// The last number and source headers written, in the arena, for
	// codec.AppendNext: consecutive numbers and offsets are mostly what
	// a sub-batch holds. Reset by each processRange.
	lastID        int64
	lastNum       []byte
	lastPartition int32
	lastOffset    int64
	lastTopic     string
	lastSrc       []byte

	counts counts
	// prefilled: the sub-batch has records that keep their own number
	// (their idempotency keys are checked against it).
	prefilled bool
}

// reset prepares the batch for the records of one poll, dealing whole
// partitions to the shards in turn.
func (b *batch) reset(fetches kgo.Fetches) {
	n := max(b.cfg.parallelism, 1)
	if b.rejecter.active.Load() {
		// Records produced alone must be alone in their record
		// batches: nothing else may be produced meanwhile.
		n = 1
	}
	for len(b.shards) < n {
		b.shards = append(b.shards, &shard{b: b})
	}
	for _, sh := range b.shards {
		sh.in = sh.in[:0]
	}
	k, total := 0, 0
	fetches.EachPartition(func(p kgo.FetchTopicPartition) {
		if len(p.Records) == 0 {
			return
		}
		sh := b.shards[k%n]
		k++
		// The eos loop has dropped transaction markers and records past
		// a bound already.
		sh.in = append(sh.in, p.Records...)
		total += len(p.Records)
	})
	for _, sh := range b.shards {
		sh.insp = grow(sh.insp, len(sh.in))
		sh.why = grow(sh.why, len(sh.in))
		sh.recs = grow(sh.recs, len(sh.in))
		sh.arena, sh.hdrs = sh.arena[:0], sh.hdrs[:0]
		sh.counts = counts{in: len(sh.in)}
	}
	b.counts = counts{in: total}
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// process runs every shard (in parallel when there are several with
// records), handing each output record to produce as soon as it is built,
// and adds up their counts. produce must be safe for concurrent use. On
// error the caller must abort the transaction: some records may already be
// produced into it.
func (b *batch) process(ctx context.Context, produce func(*kgo.Record)) error {
	busy := 0
	for _, sh := range b.shards {
		if len(sh.in) > 0 {
			busy++
		}
	}
	errs := make([]error, len(b.shards))
	if busy <= 1 {
		for i, sh := range b.shards {
			if len(sh.in) > 0 {
				errs[i] = sh.process(ctx, produce)
			}
		}
	} else {
		var wg sync.WaitGroup
		for i, sh := range b.shards {
			if len(sh.in) == 0 {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = sh.process(ctx, produce)
			}()
		}
		wg.Wait()
	}
	for i, sh := range b.shards {
		if errs[i] != nil {
			return errs[i]
		}
		c := sh.counts
		b.counts.numbered += c.numbered
		b.counts.passthrough += c.passthrough
		b.counts.dlq += c.dlq
		b.counts.repeats += c.repeats
		b.counts.dropped += c.dropped
		b.counts.dlqByClass = addClasses(b.counts.dlqByClass, c.dlqByClass)
		b.counts.renumbered = addClasses(b.counts.renumbered, c.renumbered)
	}
	return nil
}

func addClasses(dst, src map[codec.Class]int) map[codec.Class]int {
	for class, n := range src {
		if dst == nil {
			dst = make(map[codec.Class]int)
		}
		dst[class] += n
	}
	return dst
}

// subBatch is how many records are inspected, numbered and handed to the
// producer at a time, so that the producer compresses and sends the first
// records while the rest are still being numbered.
const subBatch = 1024

// process numbers the shard's records in order, a sub-batch at a time.
func (b *shard) process(ctx context.Context, produce func(*kgo.Record)) error {
	for start := 0; start < len(b.in); start += subBatch {
		if err := b.processRange(ctx, start, min(start+subBatch, len(b.in)), produce); err != nil {
			return err
		}
	}
	return nil
}

func (b *shard) processRange(ctx context.Context, from, to int, produce func(*kgo.Record)) error {
	need, err := b.inspect(ctx, from, to)
	if err != nil {
		return err
	}
	b.ids = b.ids[:0]
	b.lastNum, b.lastSrc = nil, nil
	if need > 0 {
		if b.ids, err = b.b.numberer.AppendN(ctx, b.ids, need); err != nil {
			return err
		}
	}
	if idem := b.b.cfg.idem; idem != nil && (need > 0 || b.prefilled) {
		if err := b.claimKeys(ctx, idem, from, to); err != nil {
			return err
		}
	}
	// Pass 2: build each output record and hand it over.
	next := 0
	for i := from; i < to; i++ {
		r, in := b.in[i], b.insp[i]
		var (
			ok  = true
			err error
		)
		fate, reason := b.b.rejecter.of(b.source(r))
		if fate == hopeless {
			return hopelessError(b.b.cfg.dlq, string(b.src), reason)
		}
		switch {
		case fate >= rejected:
			if in.Kind == codec.NeedsNumber {
				next++ // its number is a gap
			}
			b.deadLetterClass(i, r, codec.ClassRejected, "a broker refused the record: "+reason)
		case in.Kind == codec.NeedsNumber:
			id, repeat := b.ids[next], false
			next++
			if b.b.cfg.idem != nil {
				switch k := b.claim[i-from]; {
				case k == missingKey:
					b.missingKey(ctx, i, r)
					if err := b.send(i, r, fate, produce); err != nil {
						return err
					}
					continue
				case k >= 0:
					id, repeat = b.claims[k].Number, b.claims[k].Repeat
				}
			}
			ok, err = b.number(ctx, i, r, in, id, repeat)
		case in.Kind == codec.HasNumber:
			ok, err = b.withNumber(ctx, i, r, in, b.keyClaim(i-from))
		default:
			b.deadLetter(i, r, in)
		}
		if err != nil {
			return err
		}
		if ok {
			if err := b.send(i, r, fate, produce); err != nil {
				return err
			}
		}
	}
	return nil
}

// number builds the numbered output record for input i (insp its
// NeedsNumber inspection), with number id; repeat says the idempotency key
// had it already. ok is false for a repeat that is dropped.
func (b *shard) number(ctx context.Context, i int, r *kgo.Record, in codec.Inspection, id int64, repeat bool) (ok bool, err error) {
	if repeat {
		b.counts.repeats++
		if b.b.cfg.idem.Drop {
			b.counts.dropped++
			return false, nil
		}
	}
	start := len(b.arena)
	b.arena, err = b.b.cfg.format.AppendNumbered(ctx, b.arena, r.Value, in, id)
	if err != nil {
		return false, formatError(err)
	}
	b.emit(i, r, b.b.cfg.output, b.b.outParts, b.arena[start:len(b.arena):len(b.arena)], id)
	if repeat {
		b.recs[i].Headers = append(b.recs[i].Headers, kgo.RecordHeader{Key: codec.HeaderRepeat, Value: []byte("true")})
	}
	why := b.why[i]
	if why != "" {
		b.recs[i].Headers = append(b.recs[i].Headers, kgo.RecordHeader{Key: codec.HeaderRenumbered, Value: []byte(why)})
	}
	if !b.fitsOutput(i, r) {
		return true, nil // a dead letter now
	}
	if why != "" {
		if b.counts.renumbered == nil {
			b.counts.renumbered = make(map[codec.Class]int)
		}
		b.counts.renumbered[why]++
	}
	b.counts.numbered++
	return true, nil
}

// withNumber builds the output of input i, which arrived with a number
// the judge believes (in, its HasNumber inspection), against its key's
// claim k (negative: none). ok is as for number.
func (b *shard) withNumber(ctx context.Context, i int, r *kgo.Record, in codec.Inspection, k int) (ok bool, err error) {
	switch {
	case k >= 0 && b.claims[k].Taken:
		// Another order's number. Renumbering it would need a fresh
		// number reserved before the key store's check, which the batch
		// does not take: it is dead-lettered under
		// --on-rejected-number renumber too.
		b.deadLetterClass(i, r, codec.ClassNumberTaken, taken(in.Number))
	case k < 0 || b.claims[k].Number == in.Number:
		// Passed through byte for byte; the headers say so too.
		b.emit(i, r, b.b.cfg.output, b.b.outParts, r.Value, in.Number)
		if b.fitsOutput(i, r) {
			b.counts.passthrough++
		}
	case b.b.cfg.judge.renumber:
		// The key's number, as for any record of the same key.
		b.why[i] = codec.ClassKeyMismatch
		return b.number(ctx, i, r, in.Renumber(), b.claims[k].Number, b.claims[k].Repeat)
	default:
		b.deadLetterClass(i, r, codec.ClassKeyMismatch, mismatch(in.Number, b.claims[k].Number))
	}
	return true, nil
}

// inspect classifies the records [from, to) (pass 1 of a sub-batch), makes
// room in the arenas for every output record they can make, and returns
// how many numbers they need. Its error is the Format's (a registry
// outage, classified by formatError); bad records are not errors.
func (b *shard) inspect(ctx context.Context, from, to int) (need int, err error) {
	bytes, headers := 0, 0
	b.prefilled = false
	for i := from; i < to; i++ {
		r := b.in[i]
		in, err := b.b.cfg.format.Inspect(ctx, r.Value)
		if err != nil {
			return 0, formatError(err)
		}
		b.why[i] = ""
		if in.Kind == codec.HasNumber {
			in = b.judgeNumber(i, in)
		}
		b.insp[i] = in
		headers += len(r.Headers) + 4
		bytes += len(r.Topic) + 2*20 + 2
		// An upper bound of the numbered value, for every Format: for
		// JSON the member added is ,"<field>":"<19 digits>", with room for
		// escapes in the name.
		numbered := len(r.Value) + 2*len(b.b.cfg.codec.FieldName()) + 48
		switch in.Kind {
		case codec.NeedsNumber:
			need++
			bytes += numbered
		case codec.HasNumber:
			b.prefilled = true
			bytes += 20
			if b.b.cfg.judge.renumber { // a key_mismatch may renumber it
				bytes += numbered
			}
		default:
			bytes += 256
		}
	}
	// Records already handed to the producer point into the arenas, so an
	// arena that is too small is replaced, never grown in place; the old
	// one lives as long as those records do.
	if cap(b.arena)-len(b.arena) < bytes {
		b.arena = make([]byte, 0, max(2*cap(b.arena), bytes))
	}
	if cap(b.hdrs)-len(b.hdrs) < headers {
		b.hdrs = make([]kgo.RecordHeader, 0, max(2*cap(b.hdrs), headers))
	}
	return need, nil
}

// judgeNumber checks the pre-filled number of input i (in is its HasNumber
// inspection): a number not believed makes the record Bad with its class
// or, with Trust.Renumber, one that needs a fresh number.
func (b *shard) judgeNumber(i int, in codec.Inspection) codec.Inspection {
	j := b.b.cfg.judge
	class, msg := j.check(in.Number)
	switch {
	case class == "":
		return in
	case j.renumber:
		b.why[i] = class
		return in.Renumber()
	}
	return codec.Reject(&codec.InputError{Class: class, Msg: msg})
}

// emit appends the output record for input i, with value and the number and
// source headers added to the input's headers. Key, headers and timestamp
// are kept, but for input headers named like the worker's own, which are
// renamed (codec.AppendUntrusted).
//
// The headers and the record are written field by field in place: built
// aside and copied in, their copies' wide loads of narrower stores just
// made stall (store forwarding), which the profile put at 6% of the
// worker's own work.
func (b *shard) emit(i int, r *kgo.Record, topic string, parts int32, value []byte, id int64) {
	h := len(b.hdrs)
	b.hdrs = codec.AppendUntrusted(b.hdrs, r.Headers)
	n := len(b.hdrs)
	b.hdrs = slices.Grow(b.hdrs, 2)[:n+2] // inspect made room: no copy
	start := len(b.arena)
	if b.lastNum != nil && id == b.lastID+1 && b.lastID >= 0 {
		b.arena = codec.AppendNext(b.arena, b.lastNum)
	} else {
		b.arena = codec.AppendInt(b.arena, id)
	}
	b.lastID, b.lastNum = id, b.arena[start:len(b.arena):len(b.arena)]
	b.hdrs[n].Key, b.hdrs[n].Value = codec.HeaderNumber, b.lastNum
	b.setSourceHeader(&b.hdrs[n+1], r)
	b.add(i, r, topic, parts, value, b.hdrs[h:len(b.hdrs):len(b.hdrs)])
}

// deadLetter appends the DLQ record for input i: its bytes untouched, with
// headers that say why and where it came from.
func (b *shard) deadLetter(i int, r *kgo.Record, in codec.Inspection) {
	b.deadLetterClass(i, r, in.Class(), in.Err().Error())
}

func (b *shard) deadLetterClass(i int, r *kgo.Record, class codec.Class, msg string) {
	h := len(b.hdrs)
	b.hdrs = codec.AppendUntrusted(b.hdrs, r.Headers)
	b.hdrs = append(b.hdrs,
		kgo.RecordHeader{Key: codec.HeaderErrorClass, Value: []byte(class)},
		kgo.RecordHeader{Key: codec.HeaderError, Value: []byte(msg)},
		b.sourceHeader(r))
	b.add(i, r, b.b.cfg.dlq, b.b.dlqParts, r.Value, b.hdrs[h:len(b.hdrs):len(b.hdrs)])
	b.counts.dlq++
	if b.counts.dlqByClass == nil {
		b.counts.dlqByClass = make(map[codec.Class]int)
	}
	b.counts.dlqByClass[class]++
}

// claimKeys finds the idempotency key of every record of the sub-batch
// that needs a number and settles all their claims in one round trip. A
// record that gets a number this way gets it again if it is read again, so
// a transaction that aborts after the claims is harmless.
func (b *shard) claimKeys(ctx context.Context, idem *Idempotency, from, to int) error {
	b.claim = grow(b.claim, to-from)
	b.claims = b.claims[:0]
	next := 0
	for i := from; i < to; i++ {
		b.claim[i-from] = noClaim
		var id int64
		switch in := b.insp[i]; in.Kind {
		case codec.NeedsNumber:
			id = b.ids[next]
			next++
		case codec.HasNumber:
			// Its own number is claimed for its key: the first record
			// of a key sets the key's number, whichever it is.
			id = in.Number
		default:
			continue
		}
		r := b.in[i]
		key, err := idem.key(ctx, b.b.cfg.format, r)
		if err != nil {
			if fail := keyFailure(err); fail != nil {
				return fail
			}
			// A pre-filled number without a key passes on the other
			// checks: there is no key's number to hold it against.
			if !idem.Optional && b.insp[i].Kind == codec.NeedsNumber {
				b.claim[i-from] = missingKey
			}
			continue
		}
		b.claim[i-from] = len(b.claims)
		// The claimant is this consumer group reading this record: the
		// same group reading it again (after an abort, a crash or a
		// rebalance) is no repeat, any other reader (a replay) is.
		src := append([]byte(b.b.cfg.eos.Group+" "), r.Topic...)
		b.claims = append(b.claims, idgen.Claim{Key: key, Number: id, Prefilled: b.insp[i].Kind == codec.HasNumber,
			Source: string(codec.AppendSource(src, "", r.Partition, r.Offset))})
	}
	return idem.Store.Claims(ctx, b.claims)
}

// keyClaim returns the index in claims of record from+k's idempotency
// claim, or a negative value when it made none.
func (b *shard) keyClaim(k int) int {
	if b.b.cfg.idem == nil {
		return noClaim
	}
	return b.claim[k]
}

// missingKey dead-letters a record whose required idempotency key is absent.
func (b *shard) missingKey(ctx context.Context, i int, r *kgo.Record) {
	_, err := b.b.cfg.idem.key(ctx, b.b.cfg.format, r)
	b.deadLetterClass(i, r, codec.ClassMissingKey, "idempotency key: "+err.Error())
}

func (b *shard) sourceHeader(r *kgo.Record) kgo.RecordHeader {
	var h kgo.RecordHeader
	b.setSourceHeader(&h, r)
	return h
}

// setSourceHeader sets *h to the source header of r, its value in the arena.
func (b *shard) setSourceHeader(h *kgo.RecordHeader, r *kgo.Record) {
	start := len(b.arena)
	if b.lastSrc != nil && r.Offset == b.lastOffset+1 && r.Partition == b.lastPartition && r.Topic == b.lastTopic {
		b.arena = codec.AppendNext(b.arena, b.lastSrc)
	} else {
		b.arena = codec.AppendSource(b.arena, r.Topic, r.Partition, r.Offset)
	}
	b.lastSrc = b.arena[start:len(b.arena):len(b.arena)]
	b.lastTopic, b.lastPartition, b.lastOffset = r.Topic, r.Partition, r.Offset
	h.Key, h.Value = codec.HeaderSource, b.lastSrc
}

// add fills output record i. Input partition p goes to output partition
// p mod the output's partition count, so one input partition's records
// stay in one output partition, in order.
func (b *shard) add(i int, r *kgo.Record, topic string, parts int32, value []byte, headers []kgo.RecordHeader) {
	o := &b.recs[i]
	*o = kgo.Record{} // the slot held an earlier batch's record
	o.Key, o.Value, o.Headers = r.Key, value, headers
	o.Timestamp, o.Topic, o.Partition = r.Timestamp, topic, r.Partition%parts
}

// sources yields the source of every record of the batch.
func (b *batch) sources(yield func(string) bool) {
	var buf []byte
	for _, sh := range b.shards {
		for _, r := range sh.in {
			buf = codec.AppendSource(buf[:0], r.Topic, r.Partition, r.Offset)
			if !yield(string(buf)) {
				return
			}
		}
	}
}

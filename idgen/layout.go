// Package idgen issues reversible 64-bit "snowflake" numbers.
//
// A number is a non-negative int64 whose 63 low bits hold, from high to low,
// the milliseconds since an epoch, a server ID, a worker ID (the business
// line) and a per-millisecond sequence. Every width and the epoch are
// configuration (a Layout), so capacity grows by changing bit widths, not
// code. A Generator composes numbers from blocks of sequence numbers that a
// Sequencer reserves: the Redis Lua sequencer for any number of processes, or
// the in-process sequencer for one.
//
// idgen knows nothing of Kafka or JSON.
package idgen

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// TotalBits is the number of bits a layout divides: an int64 minus its sign.
const TotalBits = 63

// Default widths and epoch: the origin's layout (41/5/5/12 from
// 2021-11-12T00:00:00+08:00), which runs until 2091.
const (
	DefaultTimeBits     = 41
	DefaultServerBits   = 5
	DefaultWorkerBits   = 5
	DefaultSequenceBits = 12
)

// DefaultEpoch is the origin's epoch, 2021-11-12T00:00:00 China Standard Time.
var DefaultEpoch = time.Date(2021, 11, 12, 0, 0, 0, 0, time.FixedZone("CST", 8*3600))

// Errors of layouts, identities and numbers. Errors returned by this package
// wrap one of these; test for them with errors.Is.
var (
	ErrBitsSum        = errors.New("idgen: bit widths must add up to 63")
	ErrTimeBits       = errors.New("idgen: time bits out of range")
	ErrSequenceBits   = errors.New("idgen: sequence bits out of range")
	ErrNegativeBits   = errors.New("idgen: bit width is negative")
	ErrServerID       = errors.New("idgen: server id out of range")
	ErrWorkerID       = errors.New("idgen: worker id out of range")
	ErrSequence       = errors.New("idgen: sequence out of range")
	ErrBeforeEpoch    = errors.New("idgen: time is before the layout's epoch")
	ErrExhausted      = errors.New("idgen: time is past the layout's end")
	ErrNegativeID     = errors.New("idgen: number is negative")
	ErrNotDecimal     = errors.New("idgen: number is not a decimal integer")
	ErrIDOverflow     = errors.New("idgen: number is above 2^63-1")
	ErrNoSequencer    = errors.New("idgen: no sequencer")
	ErrLayoutChange   = errors.New("idgen: layout change would reissue numbers")
	ErrClockBackwards = errors.New("idgen: clock moved backwards too far")
	ErrNotIncreasing  = errors.New("idgen: sequencer returned a block that does not increase")
	ErrBadReservation = errors.New("idgen: sequencer returned an invalid reservation")
	ErrCount          = errors.New("idgen: count must be positive")
)

// Time-field limits. A time field narrower than 20 bits wraps in under 20
// minutes, and one wider than 53 bits could not be exchanged with JavaScript
// or Lua doubles; neither is a configuration anyone means.
const (
	MinTimeBits = 20
	MaxTimeBits = 53
	// MaxSequenceBits keeps a block's sequence numbers exact in Lua doubles.
	MaxSequenceBits = 30
)

// FieldError reports a value that does not fit its field of the layout, for
// example "server id 40 does not fit in 5 bits (max 31)".
type FieldError struct {
	Field string // "server id", "worker id", "sequence" or "time"
	Value int64
	Bits  int
	Max   int64
	err   error
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("%s %d does not fit in %d bits (max %d)", e.Field, e.Value, e.Bits, e.Max)
}

// Unwrap returns the sentinel of the field: ErrServerID, ErrWorkerID, ...
func (e *FieldError) Unwrap() error { return e.err }

// TimeRangeError reports a time outside the span a layout can encode. It
// names the date so that the operator knows which bound was crossed.
type TimeRangeError struct {
	At    time.Time // the time that was to be encoded
	Bound time.Time // the layout's epoch or end date
	err   error     // ErrBeforeEpoch or ErrExhausted
}

func (e *TimeRangeError) Error() string {
	at, bound := e.At.UTC().Format(time.RFC3339Nano), e.Bound.UTC().Format(time.RFC3339Nano)
	if errors.Is(e.err, ErrBeforeEpoch) {
		return fmt.Sprintf("idgen: refusing to issue numbers at %s: the layout's epoch is %s (set an earlier --epoch or fix the clock)", at, bound)
	}
	return fmt.Sprintf("idgen: refusing to issue numbers at %s: the layout ran out at %s (widen --time-bits or move --epoch; never let numbers wrap)", at, bound)
}

// Unwrap returns ErrBeforeEpoch or ErrExhausted.
func (e *TimeRangeError) Unwrap() error { return e.err }

// Layout divides the 63 low bits of an int64 into, from high to low, time
// (milliseconds since Epoch), server, worker and sequence. The zero Layout is
// not valid; start from DefaultLayout or NewLayout.
type Layout struct {
	// Epoch is the instant whose time field is 0. Numbers keep millisecond
	// precision, so Epoch is truncated to the millisecond.
	Epoch time.Time
	// TimeBits is the width of the time field, MinTimeBits to MaxTimeBits.
	TimeBits int
	// ServerBits is the width of the server field; it may be 0.
	ServerBits int
	// WorkerBits is the width of the worker (business line) field; it may be 0.
	WorkerBits int
	// SequenceBits is the width of the per-millisecond sequence, 1 to
	// MaxSequenceBits.
	SequenceBits int
}

// DefaultLayout returns the origin's layout, 41/5/5/12 from DefaultEpoch.
func DefaultLayout() Layout {
	return Layout{
		Epoch:        DefaultEpoch,
		TimeBits:     DefaultTimeBits,
		ServerBits:   DefaultServerBits,
		WorkerBits:   DefaultWorkerBits,
		SequenceBits: DefaultSequenceBits,
	}
}

// NewLayout returns a validated layout.
func NewLayout(epoch time.Time, timeBits, serverBits, workerBits, sequenceBits int) (Layout, error) {
	l := Layout{Epoch: epoch, TimeBits: timeBits, ServerBits: serverBits, WorkerBits: workerBits, SequenceBits: sequenceBits}
	return l, l.Validate()
}

// Validate reports the first thing wrong with the layout, or nil.
func (l Layout) Validate() error {
	for _, w := range []struct {
		name string
		bits int
	}{{"time", l.TimeBits}, {"server", l.ServerBits}, {"worker", l.WorkerBits}, {"sequence", l.SequenceBits}} {
		if w.bits < 0 {
			return fmt.Errorf("%w: %s bits is %d", ErrNegativeBits, w.name, w.bits)
		}
	}
	if sum := l.TimeBits + l.ServerBits + l.WorkerBits + l.SequenceBits; sum != TotalBits {
		return fmt.Errorf("%w: %d+%d+%d+%d = %d (time+server+worker+sequence)",
			ErrBitsSum, l.TimeBits, l.ServerBits, l.WorkerBits, l.SequenceBits, sum)
	}
	if l.TimeBits < MinTimeBits || l.TimeBits > MaxTimeBits {
		return fmt.Errorf("%w: %d time bits, want %d to %d", ErrTimeBits, l.TimeBits, MinTimeBits, MaxTimeBits)
	}
	if l.SequenceBits < 1 || l.SequenceBits > MaxSequenceBits {
		return fmt.Errorf("%w: %d sequence bits, want 1 to %d", ErrSequenceBits, l.SequenceBits, MaxSequenceBits)
	}
	if l.Epoch.IsZero() {
		return fmt.Errorf("%w: the epoch is not set", ErrTimeBits)
	}
	if e := l.EpochMs(); e < 0 || e > math.MaxInt64-l.MaxTime() {
		return fmt.Errorf("%w: epoch %s leaves the layout's end outside int64 milliseconds", ErrTimeBits, l.Epoch.UTC().Format(time.RFC3339))
	}
	return nil
}

// EpochMs is the epoch in Unix milliseconds.
func (l Layout) EpochMs() int64 { return l.Epoch.UnixMilli() }

// MaxTime is the largest time field: milliseconds since the epoch.
func (l Layout) MaxTime() int64 { return 1<<l.TimeBits - 1 }

// MaxServer is the largest server ID; 0 when the server field is 0 bits wide.
func (l Layout) MaxServer() int64 { return 1<<l.ServerBits - 1 }

// MaxWorker is the largest worker ID; 0 when the worker field is 0 bits wide.
func (l Layout) MaxWorker() int64 { return 1<<l.WorkerBits - 1 }

// MaxSequence is the largest sequence number in one millisecond.
func (l Layout) MaxSequence() int64 { return 1<<l.SequenceBits - 1 }

// PerMillisecond is how many numbers one (server, worker) pair can issue in
// one millisecond.
func (l Layout) PerMillisecond() int64 { return 1 << l.SequenceBits }

// PerSecond is how many numbers one (server, worker) pair can issue in one
// second: the layout's hard limit.
func (l Layout) PerSecond() int64 { return 1000 << l.SequenceBits }

// Start is the first instant the layout encodes: the epoch, in milliseconds.
func (l Layout) Start() time.Time { return time.UnixMilli(l.EpochMs()).UTC() }

// End is the last millisecond the layout encodes. Past it the generator
// refuses to issue numbers rather than wrap.
func (l Layout) End() time.Time { return time.UnixMilli(l.EpochMs() + l.MaxTime()).UTC() }

// TimeShift is the bit position of the time field.
func (l Layout) TimeShift() int { return l.ServerBits + l.WorkerBits + l.SequenceBits }

// String returns the layout as "41/5/5/12@2021-11-11T16:00:00Z".
func (l Layout) String() string {
	return fmt.Sprintf("%d/%d/%d/%d@%s", l.TimeBits, l.ServerBits, l.WorkerBits, l.SequenceBits,
		l.Start().Format("2006-01-02T15:04:05.000Z07:00"))
}

// fingerprint identifies the layout in sequencer state: "t41s5w5q12e1636646400000".
func (l Layout) fingerprint() string {
	return "t" + strconv.Itoa(l.TimeBits) + "s" + strconv.Itoa(l.ServerBits) + "w" + strconv.Itoa(l.WorkerBits) +
		"q" + strconv.Itoa(l.SequenceBits) + "e" + strconv.FormatInt(l.EpochMs(), 10)
}

// CheckServer reports whether id fits the server field.
func (l Layout) CheckServer(id int64) error {
	return l.check("server id", id, l.ServerBits, ErrServerID)
}

// CheckWorker reports whether id fits the worker field.
func (l Layout) CheckWorker(id int64) error {
	return l.check("worker id", id, l.WorkerBits, ErrWorkerID)
}

func (l Layout) check(field string, v int64, bits int, sentinel error) error {
	if max := int64(1)<<bits - 1; v < 0 || v > max {
		return &FieldError{Field: field, Value: v, Bits: bits, Max: max, err: sentinel}
	}
	return nil
}

// CheckTime reports whether the Unix millisecond ms lies within the layout's
// span; the error is a *TimeRangeError naming the bound that was crossed.
func (l Layout) CheckTime(ms int64) error {
	e := l.EpochMs()
	switch {
	case ms < e:
		return &TimeRangeError{At: time.UnixMilli(ms), Bound: l.Start(), err: ErrBeforeEpoch}
	case ms-e > l.MaxTime():
		return &TimeRangeError{At: time.UnixMilli(ms), Bound: l.End(), err: ErrExhausted}
	}
	return nil
}

// Compose builds the number for Unix millisecond ms, server, worker and
// sequence. Every field is checked, so a bad value is an error, never a
// number that spills into a neighbouring field or the sign bit.
func (l Layout) Compose(ms, server, worker, sequence int64) (int64, error) {
	if err := l.CheckTime(ms); err != nil {
		return 0, err
	}
	if err := l.CheckServer(server); err != nil {
		return 0, err
	}
	if err := l.CheckWorker(worker); err != nil {
		return 0, err
	}
	if err := l.check("sequence", sequence, l.SequenceBits, ErrSequence); err != nil {
		return 0, err
	}
	return l.compose(ms-l.EpochMs(), server, worker, sequence), nil
}

// compose packs fields that the caller has checked.
func (l Layout) compose(elapsed, server, worker, sequence int64) int64 {
	return elapsed<<l.TimeShift() | server<<(l.WorkerBits+l.SequenceBits) | worker<<l.SequenceBits | sequence
}

// Parts is a number decoded into its fields.
type Parts struct {
	ID        int64
	UnixMs    int64     // the number's time in Unix milliseconds
	ElapsedMs int64     // milliseconds since the layout's epoch: the time field
	Server    int64     // server ID
	Worker    int64     // worker ID (business line)
	Sequence  int64     // sequence within the millisecond
	Time      time.Time // UnixMs as a UTC time
}

// Decompose decodes a number. Every non-negative int64 decodes under every
// valid layout, since the fields cover all 63 bits; a negative one is
// ErrNegativeID.
func (l Layout) Decompose(id int64) (Parts, error) {
	if id < 0 {
		return Parts{}, fmt.Errorf("%w: %d", ErrNegativeID, id)
	}
	elapsed := id >> l.TimeShift()
	unix := l.EpochMs() + elapsed
	return Parts{
		ID:        id,
		UnixMs:    unix,
		ElapsedMs: elapsed,
		Server:    id >> (l.WorkerBits + l.SequenceBits) & l.MaxServer(),
		Worker:    id >> l.SequenceBits & l.MaxWorker(),
		Sequence:  id & l.MaxSequence(),
		Time:      time.UnixMilli(unix).UTC(),
	}, nil
}

// ParseID parses a number written in decimal: digits only, no sign, no
// spaces, at most 2^63-1. It is for numbers a person types (the decode
// command), so unlike codec.ParseNumber, the rule for numbers on the wire,
// it accepts leading zeros ("007" is 7) and says precisely what is wrong
// (ErrNotDecimal, ErrNegativeID, ErrIDOverflow). idgen does not import
// codec: the generator sits below the codecs, which know nothing of it.
func ParseID(s string) (int64, error) {
	if s == "" {
		return 0, fmt.Errorf("%w: empty", ErrNotDecimal)
	}
	if s[0] == '-' {
		if strings.Trim(s[1:], "0123456789") == "" && len(s) > 1 {
			return 0, fmt.Errorf("%w: %q", ErrNegativeID, s)
		}
		return 0, fmt.Errorf("%w: %q", ErrNotDecimal, s)
	}
	var v int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%w: %q", ErrNotDecimal, s)
		}
		d := int64(c - '0')
		if v > (math.MaxInt64-d)/10 {
			// Keep scanning so that "9999999999999999999x" says "not decimal".
			if strings.Trim(s[i:], "0123456789") != "" {
				return 0, fmt.Errorf("%w: %q", ErrNotDecimal, s)
			}
			return 0, fmt.Errorf("%w: %s", ErrIDOverflow, s)
		}
		v = v*10 + d
	}
	return v, nil
}

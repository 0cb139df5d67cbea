package idgen

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"testing"
	"time"
)

func TestDefaultLayout(t *testing.T) {
	l := DefaultLayout()
	if err := l.Validate(); err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"start", l.Start().Format(time.RFC3339), "2021-11-11T16:00:00Z"},
		{"end", l.End().Format(time.RFC3339Nano), "2091-07-19T07:47:35.551Z"},
		{"per ms", l.PerMillisecond(), int64(4096)},
		{"per second", l.PerSecond(), int64(4096000)},
		{"max server", l.MaxServer(), int64(31)},
		{"max worker", l.MaxWorker(), int64(31)},
		{"max sequence", l.MaxSequence(), int64(4095)},
		{"shift", l.TimeShift(), 22},
		{"string", l.String(), "41/5/5/12@2021-11-11T16:00:00.000Z"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
}

// The origin article's own example decodes to the parts it printed.
func TestDecomposeOriginExample(t *testing.T) {
	p, err := DefaultLayout().Decompose(229710323916801)
	if err != nil {
		t.Fatal(err)
	}
	if p.ElapsedMs != 54767209 || p.Server != 1 || p.Worker != 2 || p.Sequence != 1 {
		t.Fatalf("parts = %+v", p)
	}
	if got := p.Time.Format("2006-01-02T15:04:05.000Z07:00"); got != "2021-11-12T07:12:47.209Z" {
		t.Fatalf("time = %s", got)
	}
}

func TestValidate(t *testing.T) {
	epoch := DefaultEpoch
	cases := []struct {
		name string
		l    Layout
		want error
	}{
		{"default", DefaultLayout(), nil},
		{"no server or worker bits", Layout{Epoch: epoch, TimeBits: 41, SequenceBits: 22}, nil},
		{"wide sequence", Layout{Epoch: epoch, TimeBits: 40, ServerBits: 5, WorkerBits: 5, SequenceBits: 13}, nil},
		{"sum 62", Layout{Epoch: epoch, TimeBits: 41, ServerBits: 5, WorkerBits: 4, SequenceBits: 12}, ErrBitsSum},
		{"sum 64", Layout{Epoch: epoch, TimeBits: 42, ServerBits: 5, WorkerBits: 5, SequenceBits: 12}, ErrBitsSum},
		{"negative", Layout{Epoch: epoch, TimeBits: 41, ServerBits: -1, WorkerBits: 11, SequenceBits: 12}, ErrNegativeBits},
		{"time too narrow", Layout{Epoch: epoch, TimeBits: 19, ServerBits: 20, WorkerBits: 12, SequenceBits: 12}, ErrTimeBits},
		{"time too wide", Layout{Epoch: epoch, TimeBits: 54, ServerBits: 0, WorkerBits: 0, SequenceBits: 9}, ErrTimeBits},
		{"no sequence", Layout{Epoch: epoch, TimeBits: 41, ServerBits: 11, WorkerBits: 11, SequenceBits: 0}, ErrSequenceBits},
		{"sequence too wide", Layout{Epoch: epoch, TimeBits: 33, ServerBits: 0, WorkerBits: 0, SequenceBits: 30 + 0}, nil},
		{"sequence 31", Layout{Epoch: epoch, TimeBits: 32, ServerBits: 0, WorkerBits: 0, SequenceBits: 31}, ErrSequenceBits},
		{"no epoch", Layout{TimeBits: 41, ServerBits: 5, WorkerBits: 5, SequenceBits: 12}, ErrTimeBits},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.l.Validate()
			if !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
				t.Fatalf("Validate() = %v, want %v", err, c.want)
			}
		})
	}
}

func TestFieldErrors(t *testing.T) {
	l := DefaultLayout()
	err := l.CheckServer(40)
	if !errors.Is(err, ErrServerID) || err.Error() != "server id 40 does not fit in 5 bits (max 31)" {
		t.Fatalf("CheckServer(40) = %v", err)
	}
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Max != 31 || fe.Value != 40 {
		t.Fatalf("not a *FieldError with data: %#v", err)
	}
	if err := l.CheckWorker(-1); !errors.Is(err, ErrWorkerID) {
		t.Fatalf("CheckWorker(-1) = %v", err)
	}
	zero := Layout{Epoch: DefaultEpoch, TimeBits: 41, ServerBits: 0, WorkerBits: 10, SequenceBits: 12}
	if err := zero.CheckServer(0); err != nil {
		t.Fatalf("server 0 in a 0-bit field: %v", err)
	}
	if err := zero.CheckServer(1); err == nil || err.Error() != "server id 1 does not fit in 0 bits (max 0)" {
		t.Fatalf("server 1 in a 0-bit field: %v", err)
	}
	if _, err := l.Compose(l.EpochMs(), 0, 0, 4096); !errors.Is(err, ErrSequence) {
		t.Fatalf("sequence 4096 = %v, want ErrSequence: the origin's off-by-one must be refused", err)
	}
}

func TestComposeRefusesTimeOutsideTheLayout(t *testing.T) {
	l := DefaultLayout()
	_, err := l.Compose(l.EpochMs()-1, 0, 0, 0)
	var tre *TimeRangeError
	if !errors.Is(err, ErrBeforeEpoch) || !errors.As(err, &tre) {
		t.Fatalf("before epoch: %v", err)
	}
	if want := "2021-11-11T16:00:00Z"; !contains(err.Error(), want) {
		t.Fatalf("error %q does not name the epoch %s", err, want)
	}
	last := l.EpochMs() + l.MaxTime()
	id, err := l.Compose(last, l.MaxServer(), l.MaxWorker(), l.MaxSequence())
	if err != nil || id != math.MaxInt64 {
		t.Fatalf("last number = %d, %v; want 2^63-1", id, err)
	}
	if _, err := l.Compose(last+1, 0, 0, 0); !errors.Is(err, ErrExhausted) || !contains(err.Error(), "2091-07-19T07:47:35.551Z") {
		t.Fatalf("past the end: %v", err)
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

func TestComposeDecomposeRoundTrip(t *testing.T) {
	layouts := []Layout{
		DefaultLayout(),
		{Epoch: time.UnixMilli(0), TimeBits: 41, ServerBits: 0, WorkerBits: 0, SequenceBits: 22},
		{Epoch: DefaultEpoch, TimeBits: 40, ServerBits: 3, WorkerBits: 7, SequenceBits: 13},
		{Epoch: DefaultEpoch, TimeBits: 53, ServerBits: 0, WorkerBits: 9, SequenceBits: 1},
	}
	for _, l := range layouts {
		t.Run(l.String(), func(t *testing.T) {
			for _, f := range [][4]int64{
				{l.EpochMs(), 0, 0, 0},
				{l.EpochMs() + 1, l.MaxServer(), 0, l.MaxSequence()},
				{l.EpochMs() + 123456789, l.MaxServer() / 2, l.MaxWorker(), 1},
				{l.EpochMs() + l.MaxTime(), l.MaxServer(), l.MaxWorker(), l.MaxSequence()},
			} {
				id, err := l.Compose(f[0], f[1], f[2], f[3])
				if err != nil {
					t.Fatal(err)
				}
				p, err := l.Decompose(id)
				if err != nil {
					t.Fatal(err)
				}
				if got := [4]int64{p.UnixMs, p.Server, p.Worker, p.Sequence}; got != f {
					t.Fatalf("round trip of %v gave %v (id %d)", f, got, id)
				}
				if p.Time.UnixMilli() != f[0] || p.ElapsedMs != f[0]-l.EpochMs() {
					t.Fatalf("time lost precision: %v", p)
				}
			}
		})
	}
}

func TestParseID(t *testing.T) {
	cases := []struct {
		in   string
		want int64
		err  error
	}{
		{"0", 0, nil},
		{"229710323916801", 229710323916801, nil},
		{"9223372036854775807", math.MaxInt64, nil},
		{"9223372036854775808", 0, ErrIDOverflow},
		{"99999999999999999999", 0, ErrIDOverflow},
		{"-1", 0, ErrNegativeID},
		{"", 0, ErrNotDecimal},
		{"-", 0, ErrNotDecimal},
		{"+1", 0, ErrNotDecimal},
		{" 1", 0, ErrNotDecimal},
		{"1e3", 0, ErrNotDecimal},
		{"0x10", 0, ErrNotDecimal},
		{"99999999999999999999x", 0, ErrNotDecimal},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			got, err := ParseID(c.in)
			if !errors.Is(err, c.err) || (c.err == nil) != (err == nil) || got != c.want {
				t.Fatalf("ParseID(%q) = %d, %v; want %d, %v", c.in, got, err, c.want, c.err)
			}
		})
	}
}

// FuzzComposeDecompose checks, for any fields and any valid layout built
// from the fuzzed widths: Compose either refuses with an error or gives a
// non-negative number that Decompose turns back into exactly those fields.
func FuzzComposeDecompose(f *testing.F) {
	f.Add(uint8(41), uint8(5), uint8(5), int64(54767209), int64(1), int64(2), int64(1))
	f.Add(uint8(53), uint8(0), uint8(0), int64(-1), int64(0), int64(0), int64(0))
	f.Add(uint8(20), uint8(20), uint8(3), int64(1<<20), int64(1<<19), int64(7), int64(1))
	f.Fuzz(func(t *testing.T, tb, sb, wb uint8, elapsed, server, worker, seq int64) {
		l := Layout{Epoch: DefaultEpoch, TimeBits: int(tb % 64), ServerBits: int(sb % 64), WorkerBits: int(wb % 64)}
		l.SequenceBits = TotalBits - l.TimeBits - l.ServerBits - l.WorkerBits
		if l.Validate() != nil {
			return
		}
		ms := l.EpochMs() + elapsed
		if elapsed > math.MaxInt64-l.EpochMs() {
			return
		}
		id, err := l.Compose(ms, server, worker, seq)
		if err != nil {
			return
		}
		if id < 0 {
			t.Fatalf("negative number %d", id)
		}
		p, err := l.Decompose(id)
		if err != nil {
			t.Fatal(err)
		}
		if p.UnixMs != ms || p.Server != server || p.Worker != worker || p.Sequence != seq {
			t.Fatalf("%v: (%d,%d,%d,%d) -> %d -> %+v", l, ms, server, worker, seq, id, p)
		}
	})
}

// FuzzParseID checks that ParseID accepts exactly the decimal strings of
// non-negative int64 values, written without sign or leading garbage, and
// that it returns the value strconv finds.
func FuzzParseID(f *testing.F) {
	for _, s := range []string{"0", "229710323916801", "9223372036854775808", "-1", "+1", "1e3", "007"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseID(s)
		want, werr := strconv.ParseInt(s, 10, 64)
		plain := s != "" && s[0] != '+' && s[0] != '-'
		if werr == nil && want >= 0 && plain {
			if err != nil || got != want {
				t.Fatalf("ParseID(%q) = %d, %v; want %d", s, got, err, want)
			}
			return
		}
		if err == nil {
			t.Fatalf("ParseID(%q) = %d, want an error", s, got)
		}
	})
}

func ExampleLayout_Decompose() {
	p, _ := DefaultLayout().Decompose(229710323916801)
	fmt.Println(p.Time.Format("2006-01-02T15:04:05.000Z07:00"), p.ElapsedMs, p.Server, p.Worker, p.Sequence)
	// Output: 2021-11-12T07:12:47.209Z 54767209 1 2 1
}

func ExampleLayout_Compose() {
	l := DefaultLayout()
	id, _ := l.Compose(time.Date(2021, 11, 12, 7, 12, 47, 209e6, time.UTC).UnixMilli(), 1, 2, 1)
	fmt.Println(id)
	_, err := l.Compose(l.EpochMs(), 40, 0, 0)
	fmt.Println(err)
	// Output:
	// 229710323916801
	// server id 40 does not fit in 5 bits (max 31)
}

func ExampleNewLayout() {
	// Twice the capacity per millisecond, paid for with half the lifetime.
	l, err := NewLayout(DefaultEpoch, 40, 5, 5, 13)
	fmt.Println(err, l.PerSecond(), l.End().Format(time.DateOnly))
	// Output: <nil> 8192000 2056-09-14
}

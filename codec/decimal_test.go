package codec

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
)

// AppendInt writes what strconv.AppendInt does, for every digit count,
// both sides of every power of ten, the extremes and random values, into
// a dst with room and into one without.
func TestAppendIntIsStrconv(t *testing.T) {
	vals := []int64{0, 1, 9, 10, 11, 99, 100, 101, math.MaxInt64, math.MaxInt64 - 1, math.MinInt64, -1, -10, -99}
	for p := int64(1); p <= math.MaxInt64/10; p *= 10 {
		vals = append(vals, p-1, p, p+1, 10*p-1)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 100000 {
		vals = append(vals, r.Int64N(math.MaxInt64), int64(r.Uint64()>>uint(r.IntN(64))))
	}
	for _, v := range vals {
		want := strconv.AppendInt([]byte("x/"), v, 10)
		if got := AppendInt([]byte("x/"), v); string(got) != string(want) {
			t.Fatalf("AppendInt(%d) = %q, want %q", v, got, want)
		}
		roomy := make([]byte, 2, 64)
		copy(roomy, "x/")
		if got := AppendInt(roomy, v); string(got) != string(want) {
			t.Fatalf("AppendInt(%d) into a roomy dst = %q, want %q", v, got, want)
		}
		if n := decimalLen(v); n != len(want)-2 {
			t.Fatalf("decimalLen(%d) = %d, want %d", v, n, len(want)-2)
		}
	}
}

func BenchmarkAppendInt(b *testing.B) {
	const id = 7_412_345_678_901_234_567 >> 1 // a 19-digit snowflake number
	buf := make([]byte, 0, 32)
	b.Run("codec", func(b *testing.B) {
		for b.Loop() {
			buf = AppendInt(buf[:0], id)
		}
	})
	b.Run("strconv", func(b *testing.B) {
		for b.Loop() {
			buf = strconv.AppendInt(buf[:0], id, 10)
		}
	})
}

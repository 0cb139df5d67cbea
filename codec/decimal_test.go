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

// AppendNext of the decimal form of v, alone and after a source's prefix,
// is the decimal form of v+1, both sides of every power of ten and for
// random values.
func TestAppendNextIsTheSuccessor(t *testing.T) {
	vals := []int64{0, 1, 8, 9, 10, 19, 99, 100, 109, 199, 999, math.MaxInt64 - 1}
	for p := int64(1); p <= math.MaxInt64/10; p *= 10 {
		vals = append(vals, p-2, p-1, p, 10*p-1)
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 100000 {
		vals = append(vals, r.Int64N(math.MaxInt64-1), int64(r.Uint64()>>uint(r.IntN(64)+1)))
	}
	for _, v := range vals {
		if v < 0 || v == math.MaxInt64 {
			continue
		}
		want := strconv.AppendInt([]byte("x/"), v+1, 10)
		if got := AppendNext([]byte("x/"), strconv.AppendInt(nil, v, 10)); string(got) != string(want) {
			t.Fatalf("AppendNext(%d) = %q, want %q", v, got, want)
		}
		src := AppendSource(nil, "orders", 3, v)
		if got, want := AppendNext(nil, src), AppendSource(nil, "orders", 3, v+1); string(got) != string(want) {
			t.Fatalf("AppendNext(%q) = %q, want %q", src, got, want)
		}
	}
}

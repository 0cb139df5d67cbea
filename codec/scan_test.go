package codec

import (
	"math/rand/v2"
	"testing"
)

// skipStrSafeByByte is skipStrSafe one byte at a time, the reference.
func skipStrSafeByByte(data []byte, i int) int {
	for i < len(data) && strSafe[data[i]] {
		i++
	}
	return i
}

// The eight-bytes-at-a-time skip stops exactly where the byte loop does:
// every byte value at every position of buffers up to 24 bytes, from every
// start, and random buffers mixing safe bytes with the ones that stop it.
func TestSkipStrSafe(t *testing.T) {
	for n := 1; n <= 24; n++ {
		for at := 0; at < n; at++ {
			for c := 0; c < 256; c++ {
				data := make([]byte, n)
				for k := range data {
					data[k] = 'a'
				}
				data[at] = byte(c)
				for from := 0; from <= n; from++ {
					if got, want := skipStrSafe(data, from), skipStrSafeByByte(data, from); got != want {
						t.Fatalf("%q from %d: %d, want %d", data, from, got, want)
					}
				}
			}
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	stops := []byte{'"', '\\', 0, 0x1f, 0x7f, 0x80, 0xc3, 0xff, ' ', '~'}
	for range 100000 {
		data := make([]byte, rng.IntN(40))
		for k := range data {
			if rng.IntN(8) == 0 {
				data[k] = stops[rng.IntN(len(stops))]
			} else {
				data[k] = byte(0x20 + rng.IntN(0x5f))
			}
		}
		from := rng.IntN(len(data) + 1)
		if got, want := skipStrSafe(data, from), skipStrSafeByByte(data, from); got != want {
			t.Fatalf("%q from %d: %d, want %d", data, from, got, want)
		}
	}
}

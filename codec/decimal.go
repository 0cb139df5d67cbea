package codec

import (
	"math/bits"
	"strconv"
)

// AppendInt appends the decimal form of v to dst, the bytes
// strconv.AppendInt(dst, v, 10) appends. It writes the digits in place,
// four a step, where strconv formats two a step into a buffer of its own
// and copies it: every numbered record formats its number twice (the
// splice and the header) and its source's partition and offset, so this
// is on the worker's path several times a record.
func AppendInt(dst []byte, v int64) []byte {
	if v < 0 {
		return strconv.AppendInt(dst, v, 10)
	}
	u := uint64(v)
	n := decimalLen(v)
	l := len(dst)
	if cap(dst)-l < n {
		dst = append(dst, make([]byte, n)...)
	} else {
		dst = dst[:l+n]
	}
	i := l + n
	for u >= 10000 {
		q := u / 10000
		r := uint32(u - q*10000)
		hi, lo := (r/100)*2, (r%100)*2
		i -= 4
		dst[i], dst[i+1], dst[i+2], dst[i+3] = digitPairs[hi], digitPairs[hi+1], digitPairs[lo], digitPairs[lo+1]
		u = q
	}
	for u >= 100 {
		q := u / 100
		r := (u - q*100) * 2
		i -= 2
		dst[i], dst[i+1] = digitPairs[r], digitPairs[r+1]
		u = q
	}
	if u >= 10 {
		dst[i-2], dst[i-1] = digitPairs[2*u], digitPairs[2*u+1]
	} else {
		dst[i-1] = byte('0' + u)
	}
	return dst
}

// decimalLen is the length of v's decimal form.
func decimalLen(v int64) int {
	if v < 0 {
		var buf [20]byte
		return len(strconv.AppendInt(buf[:0], v, 10))
	}
	u := uint64(v)
	// bits.Len64(u)*1233>>12 is floor(log10(2^len)), one short of the
	// digit count or exact; one comparison settles it.
	n := bits.Len64(u) * 1233 >> 12
	if u >= pow10[n] {
		n++
	}
	return max(n, 1)
}

var pow10 = [...]uint64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19}

const digitPairs = "00010203040506070809" +
	"10111213141516171819" +
	"20212223242526272829" +
	"30313233343536373839" +
	"40414243444546474849" +
	"50515253545556575859" +
	"60616263646566676869" +
	"70717273747576777879" +
	"80818283848586878889" +
	"90919293949596979899"

// AppendNext appends s with the decimal number it ends in increased by
// one, carrying as far as needed: "41" becomes "42", "t/0/199"
// "t/0/200" and "99" "100". s must end in a digit. It is AppendInt or
// AppendSource of the next number for the price of a copy: the worker
// formats consecutive numbers and consecutive offsets a record at a time,
// and division by ten is most of AppendInt's cost.
func AppendNext(dst, s []byte) []byte {
	l := len(dst)
	dst = append(dst, s...)
	i := len(dst) - 1
	for i >= l && dst[i] == '9' {
		dst[i] = '0'
		i--
	}
	if i >= l && dst[i] >= '0' && dst[i] < '9' {
		dst[i]++
		return dst
	}
	// Every digit carried: a new leading 1 after the prefix.
	dst = append(dst, 0)
	copy(dst[i+2:], dst[i+1:])
	dst[i+1] = '1'
	return dst
}

package codec

import (
	"fmt"
	"strconv"
	"strings"
)

// AppendSource appends "topic/partition/offset", the value of the
// [HeaderSource] header and of an audit record's source, to dst.
func AppendSource(dst []byte, topic string, partition int32, offset int64) []byte {
	dst = append(dst, topic...)
	dst = append(dst, '/')
	dst = AppendInt(dst, int64(partition))
	dst = append(dst, '/')
	return AppendInt(dst, offset)
}

// ParseSource parses what AppendSource writes. It splits at the last two
// slashes, so a topic containing '/' (which Kafka forbids, but a header can
// hold anything) still parses. The topic must be non-empty; partition and
// offset must be canonical non-negative decimals (no sign, no leading
// zeros), so that a parsed source always prints back to the same string.
// Errors wrap ErrInvalidSource.
func ParseSource(s string) (topic string, partition int32, offset int64, err error) {
	j := strings.LastIndexByte(s, '/')
	if j < 0 {
		return "", 0, 0, fmt.Errorf("codec: source %q: want topic/partition/offset: %w", s, ErrInvalidSource)
	}
	i := strings.LastIndexByte(s[:j], '/')
	if i < 1 {
		return "", 0, 0, fmt.Errorf("codec: source %q: want topic/partition/offset with a non-empty topic: %w", s, ErrInvalidSource)
	}
	p, ok := parseCanonical(s[i+1:j], 31)
	if !ok {
		return "", 0, 0, fmt.Errorf("codec: source %q: partition %q is not a non-negative int32: %w", s, s[i+1:j], ErrInvalidSource)
	}
	o, ok := parseCanonical(s[j+1:], 63)
	if !ok {
		return "", 0, 0, fmt.Errorf("codec: source %q: offset %q is not a non-negative int64: %w", s, s[j+1:], ErrInvalidSource)
	}
	return s[:i], int32(p), o, nil
}

// parseCanonical parses a canonical decimal below 1<<bits.
func parseCanonical(s string, bits uint) (int64, bool) {
	if s == "" || (s[0] == '0' && len(s) > 1) || s[0] < '0' || s[0] > '9' {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, int(bits))
	return int64(n), err == nil
}

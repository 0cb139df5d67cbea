package codec

import (
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ReservedPrefix starts the name of every header the worker writes
// (HeaderNumber, HeaderSource, ...). On input such a header is a claim
// nobody checked, so the worker never passes it on under its name: see
// [AppendUntrusted].
const ReservedPrefix = "flakestream-"

// UntrustedPrefix is put before the name of an input header that uses
// ReservedPrefix, so that the output record carries it, value unchanged,
// without it ever being taken for one of the worker's own.
const UntrustedPrefix = "untrusted-"

// Reserved reports whether a header named key would pass for one of the
// worker's own: its name starts with ReservedPrefix, in any letter case (a
// consumer that folds case must not be fooled either).
func Reserved(key string) bool {
	return len(key) >= len(ReservedPrefix) && strings.EqualFold(key[:len(ReservedPrefix)], ReservedPrefix)
}

// AppendUntrusted appends the input headers in to dst, in order and with
// their values, renaming each reserved one (see [Reserved]) to
// UntrustedPrefix + its name. The worker's own headers, appended after
// them, are then the only ones of their names on the output record. Only
// a renamed header allocates (its new name).
func AppendUntrusted(dst, in []kgo.RecordHeader) []kgo.RecordHeader {
	for _, h := range in {
		if Reserved(h.Key) {
			h.Key = UntrustedPrefix + h.Key
		}
		dst = append(dst, h)
	}
	return dst
}

// LastHeader returns the value of the last header named key, and whether
// there is one. Every reader of the worker's headers (audit, verify,
// replay, idempotency by header) reads them through it, so they agree on
// which one counts when a record carries several.
func LastHeader(headers []kgo.RecordHeader, key string) ([]byte, bool) {
	for i := len(headers) - 1; i >= 0; i-- {
		if headers[i].Key == key {
			return headers[i].Value, true
		}
	}
	return nil, false
}

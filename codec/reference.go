package codec

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// Sizes of a reference record.
const (
	// MaxReferenceBytes bounds the JSON value of a reference record.
	MaxReferenceBytes = 1024
	// ReferenceHeadBytes is how many of the input value's first bytes a
	// reference record keeps (fewer only if the topic name is so long
	// that the JSON would pass MaxReferenceBytes otherwise).
	ReferenceHeadBytes = 256
)

// Reference stands in for a dead letter whose input would not fit the
// dead-letter topic: it says where the input is (its source coordinates:
// the input itself stays in the input topic until its retention ends), how
// large it is, its SHA-256, its first bytes and why it was dead-lettered,
// so nothing is dropped silently and the record can be found and checked.
// A reference record carries the [HeaderReference] header, the worker's
// usual dead-letter headers and the input's timestamp; it keeps neither the
// input's key nor its headers (either may be what made it too large).
type Reference struct {
	// Source is where the input is, "topic/partition/offset" (see
	// [AppendSource]).
	Source string `json:"source"`
	// Class is why the input was dead-lettered.
	Class Class `json:"class"`
	// Size is the length of the input value in bytes.
	Size int `json:"size"`
	// KeySize is the length of the input key in bytes.
	KeySize int `json:"key_size"`
	// Headers is how many headers the input had.
	Headers int `json:"headers"`
	// SHA256 is the hex SHA-256 of the input value.
	SHA256 string `json:"sha256"`
	// Head is the value's first bytes (base64 in the JSON), at most
	// ReferenceHeadBytes.
	Head []byte `json:"head"`
}

// NewReference returns the reference of an input record at topic,
// partition and offset with key, value and headers headers, dead-lettered
// as class.
func NewReference(topic string, partition int32, offset int64, key, value []byte, headers int, class Class) Reference {
	sum := sha256.Sum256(value)
	return Reference{
		Source:  string(AppendSource(nil, topic, partition, offset)),
		Class:   class,
		Size:    len(value),
		KeySize: len(key),
		Headers: headers,
		SHA256:  hex.EncodeToString(sum[:]),
		Head:    value[:min(len(value), ReferenceHeadBytes)],
	}
}

// Matches reports whether r is the reference of value: same size and
// SHA-256, and its head is value's first bytes.
func (r Reference) Matches(value []byte) bool {
	sum := sha256.Sum256(value)
	return r.Size == len(value) && r.SHA256 == hex.EncodeToString(sum[:]) &&
		len(r.Head) <= len(value) && string(r.Head) == string(value[:len(r.Head)])
}

// Append appends r as JSON, at most MaxReferenceBytes long: the head is
// shortened if the rest is long.
func (r Reference) Append(dst []byte) []byte {
	for {
		b, err := json.Marshal(r)
		if err != nil {
			// Every field marshals (a Class is a string); only a
			// change to the type could get here.
			panic(fmt.Sprintf("codec: marshal reference: %v", err))
		}
		if len(b) <= MaxReferenceBytes || len(r.Head) == 0 {
			return append(dst, b...)
		}
		r.Head = r.Head[:len(r.Head)/2]
	}
}

// ParseReference parses what Append writes. Errors wrap
// ErrInvalidReference.
func ParseReference(b []byte) (Reference, error) {
	var r Reference
	if len(b) > MaxReferenceBytes {
		return r, fmt.Errorf("codec: reference of %d bytes, over %d: %w", len(b), MaxReferenceBytes, ErrInvalidReference)
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("codec: reference: %w: %w", ErrInvalidReference, err)
	}
	if _, _, _, err := ParseSource(r.Source); err != nil {
		return r, fmt.Errorf("codec: reference: %w: %w", ErrInvalidReference, err)
	}
	if len(r.SHA256) != 2*sha256.Size || r.Class == "" || r.Size < 0 || len(r.Head) > r.Size {
		return r, fmt.Errorf("codec: reference %q: want a sha256, a class and a head no longer than size: %w", b, ErrInvalidReference)
	}
	return r, nil
}

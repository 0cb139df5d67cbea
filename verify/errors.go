package verify

import "errors"

// Sentinel errors; test with errors.Is.
var (
	// ErrRange is a range that cannot be checked as given: offsets that
	// do not parse, a start after the end, a partition the topic lacks.
	ErrRange = errors.New("verify: invalid range")
	// ErrTopic is a topic that does not exist or cannot be described.
	ErrTopic = errors.New("verify: topic not available")
)

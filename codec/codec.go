package codec

import (
	"fmt"
	"unicode/utf8"
)

// NumberFormat says how the number is written into an order event.
type NumberFormat int

const (
	// FormatString writes the number as a JSON string of decimal digits,
	// "order_no":"123". It is the default because JavaScript parses JSON
	// numbers as float64 and loses precision above 2^53, which snowflake
	// numbers pass within weeks of the epoch.
	FormatString NumberFormat = iota
	// FormatNumber writes the number as a JSON integer, "order_no":123.
	FormatNumber
)

// String returns "string" or "number", the names [ParseNumberFormat] accepts.
func (f NumberFormat) String() string {
	switch f {
	case FormatString:
		return "string"
	case FormatNumber:
		return "number"
	}
	return fmt.Sprintf("NumberFormat(%d)", int(f))
}

// ParseNumberFormat parses "string" or "number" (as written in
// configuration files and flags); "" means the default, FormatString.
func ParseNumberFormat(s string) (NumberFormat, error) {
	switch s {
	case "", "string":
		return FormatString, nil
	case "number":
		return FormatNumber, nil
	}
	return 0, fmt.Errorf("codec: number format %q: want \"string\" or \"number\": %w", s, ErrInvalidConfig)
}

// DefaultField is the number field's name when Config.Field is empty.
const DefaultField = "order_no"

// DefaultMaxBytes is the size limit when Config.MaxBytes is 0: 1 MiB, the
// default Kafka max.message.bytes.
const DefaultMaxBytes = 1 << 20

// DefaultMaxDepth is the nesting limit when Config.MaxDepth is 0: deeper
// than any order event, and shallow enough for every decoder downstream
// (Protobuf's own limit is 100, encoding/json's 10,000).
const DefaultMaxDepth = 64

// DefaultMaxElements is the element limit when Config.MaxElements is 0.
const DefaultMaxElements = 100_000

// Config configures a [Codec]. A zero field means its default.
type Config struct {
	// Field is the top-level key that holds the number. Default
	// DefaultField ("order_no"). It must be valid UTF-8; it is written
	// JSON-escaped and matched against keys after unescaping them, so
	// "order\u005fno" in an event matches order_no.
	Field string

	// Format is how a new number is written. Default FormatString. Any
	// value other than FormatString and FormatNumber is an error. Existing
	// numbers are accepted in either format whatever this says.
	Format NumberFormat

	// MaxBytes is the largest value Inspect scans; longer values are
	// ClassTooLarge without being read. Default DefaultMaxBytes (1 MiB).
	// Negative is an error. Numbering adds up to len(Field)+25 bytes, so
	// leave that much room below the output topic's max.message.bytes.
	MaxBytes int

	// MaxDepth is the deepest nesting of arrays and objects Inspect reads
	// (the top-level object is level 1); deeper values are ClassTooDeep.
	// Default DefaultMaxDepth (64), at most 10,000 (encoding/json's).
	// Negative is an error.
	MaxDepth int

	// MaxElements is the most values a value may hold, counted at every
	// level (array items and member values alike); more is
	// ClassTooManyElements. It bounds what a decoder downstream builds from
	// one record, whatever its byte size. Default DefaultMaxElements
	// (100,000). Negative is an error.
	MaxElements int

	// Valid, if set, vets a number an event already carries (for example,
	// that it decodes under the configured layout). An error makes the
	// event ClassInvalidNumber, with the error as InputError.Err. Default:
	// every number in 0..2^63-1 is valid. It is called on the hot path and
	// from several goroutines if the Codec is shared.
	Valid func(int64) error
}

// Codec inspects and numbers order events. It is immutable after New and
// safe for concurrent use.
type Codec struct {
	field    string
	format   NumberFormat
	maxBytes int
	maxDepth int
	maxElems int
	valid    func(int64) error
	// member is `,"<field>":` with the field JSON-escaped, computed once so
	// the hot path only copies it; member[1:] is used for an empty object.
	member []byte
}

// New validates cfg and returns a Codec. It returns an error wrapping
// ErrInvalidConfig if Field is not valid UTF-8, Format is unknown or
// MaxBytes is negative.
func New(cfg Config) (*Codec, error) {
	if cfg.Field == "" {
		cfg.Field = DefaultField
	}
	if !utf8.ValidString(cfg.Field) {
		return nil, fmt.Errorf("codec: field name %q is not valid utf-8: %w", cfg.Field, ErrInvalidConfig)
	}
	if cfg.Format != FormatString && cfg.Format != FormatNumber {
		return nil, fmt.Errorf("codec: unknown number format %d: want FormatString or FormatNumber: %w", int(cfg.Format), ErrInvalidConfig)
	}
	switch {
	case cfg.MaxBytes < 0:
		return nil, fmt.Errorf("codec: max bytes %d is negative: %w", cfg.MaxBytes, ErrInvalidConfig)
	case cfg.MaxBytes == 0:
		cfg.MaxBytes = DefaultMaxBytes
	}
	switch {
	case cfg.MaxDepth < 0 || cfg.MaxDepth > maxDepth:
		return nil, fmt.Errorf("codec: max depth %d: want 1..%d (0 for the default %d): %w", cfg.MaxDepth, maxDepth, DefaultMaxDepth, ErrInvalidConfig)
	case cfg.MaxDepth == 0:
		cfg.MaxDepth = DefaultMaxDepth
	}
	switch {
	case cfg.MaxElements < 0:
		return nil, fmt.Errorf("codec: max elements %d is negative: %w", cfg.MaxElements, ErrInvalidConfig)
	case cfg.MaxElements == 0:
		cfg.MaxElements = DefaultMaxElements
	}
	member := append([]byte{','}, appendJSONString(nil, cfg.Field)...)
	member = append(member, ':')
	return &Codec{
		field:    cfg.Field,
		format:   cfg.Format,
		maxBytes: cfg.MaxBytes,
		maxDepth: cfg.MaxDepth,
		maxElems: cfg.MaxElements,
		valid:    cfg.Valid,
		member:   member,
	}, nil
}

// FieldName returns the name of the number field.
func (c *Codec) FieldName() string { return c.field }

// Format returns the format new numbers are written in.
func (c *Codec) Format() NumberFormat { return c.format }

// MaxBytes returns the size limit.
func (c *Codec) MaxBytes() int { return c.maxBytes }

// MaxDepth returns the nesting limit.
func (c *Codec) MaxDepth() int { return c.maxDepth }

// MaxElements returns the element limit.
func (c *Codec) MaxElements() int { return c.maxElems }

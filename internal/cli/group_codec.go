package cli

import (
	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/idgen"
	"github.com/urfave/cli/v2"
)

// The codec group: where and how the number goes into an order event.
const (
	flagNumberField    = "number-field"
	flagNumberFormat   = "number-format"
	flagMaxRecordBytes = "max-record-bytes"
	flagMaxDepth       = "max-depth"
	flagMaxElements    = "max-elements"
)

type codecConfig struct {
	field, format string
	maxBytes      int
	maxDepth      int
	maxElements   int
}

func (cc *codecConfig) flags() []cli.Flag {
	return []cli.Flag{
		numberFieldFlag(&cc.field),
		stringFlag(flagNumberFormat, &cc.format, codec.DefaultNumberFormat.String(), "string writes \"order_no\":\"123\" (safe for JavaScript), number writes \"order_no\":123"),
		intFlag(flagMaxRecordBytes, &cc.maxBytes, codec.DefaultMaxBytes, "larger values are dead-lettered as too_large without being read"),
		intFlag(flagMaxDepth, &cc.maxDepth, codec.DefaultMaxDepth, "values nested deeper (JSON arrays and objects, Avro records, arrays and maps, Protobuf messages; the top level is 1) are dead-lettered as too_deep"),
		intFlag(flagMaxElements, &cc.maxElements, codec.DefaultMaxElements, "values holding more elements, counted at every level (array items, members, fields, map entries), are dead-lettered as too_many_elements, before they are read where a count says so"),
	}
}

// numberFieldFlag is --number-field; the audit reads the field the worker
// writes.
func numberFieldFlag(dst *string) cli.Flag {
	return stringFlag(flagNumberField, dst, codec.DefaultField, "top-level field the number is written to (and read from, when a record has no flakestream-number header): JSON, or Avro/Protobuf with --value-format")
}

// codec builds the codec the flags describe. A number an event already
// carries must decode under the layout to pass through.
func (cc *codecConfig) codec(l idgen.Layout) (*codec.Codec, error) {
	f, err := codec.ParseNumberFormat(cc.format)
	if err != nil {
		return nil, usageErr("--%s: %w", flagNumberFormat, err)
	}
	cd, err := codec.New(codec.Config{
		Field: cc.field, Format: f, MaxBytes: cc.maxBytes, MaxDepth: cc.maxDepth, MaxElements: cc.maxElements,
		Valid: func(id int64) error { _, err := l.Decompose(id); return err },
	})
	return cd, asUsage(err)
}

// valueFormat returns the Format of --value-format, numbering by the same
// rules as cd (field, number format, size limit, a valid number decodes
// under l). outputTopic names the output subject; "" for the audit.
func (cc *codecConfig) valueFormat(sc *schemaConfig, cd *codec.Codec, l idgen.Layout, outputTopic string) (codec.Format, error) {
	nf, err := codec.ParseNumberFormat(cc.format)
	if err != nil {
		return nil, usageErr("--%s: %w", flagNumberFormat, err)
	}
	return sc.format(cd, outputTopic, nf, func(id int64) error { _, err := l.Decompose(id); return err }, cc.maxBytes)
}

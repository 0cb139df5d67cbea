// Package codec reads and writes the bytes that flakestream moves through
// Kafka: it finds or splices the order-number field in a raw JSON order event
// without a full parse, extracts idempotency keys, encodes audit records, and
// names the dead-letter headers and error classes.
//
// The order-event path is built for a worker handling about a million records
// a second: [Codec.Inspect] makes one pass over a value, validating it as
// RFC 8259 JSON and UTF-8 while it looks for the number field, and records
// the offsets that [Codec.AppendNumbered] needs to write the numbered value
// into a reused buffer without allocating or scanning again. Every byte of
// the event other than the inserted member survives unchanged, so key order,
// spacing and fields the worker does not know about are never disturbed.
//
// [Format] is the one interface the worker, replay and the audit use for
// every value encoding: [JSONFormat] adapts the JSON codec to it, and package
// codec/schema implements it for Avro and Protobuf through a schema registry.
//
// codec imports only the standard library; it knows nothing of Redis or
// Kafka clients.
package codec

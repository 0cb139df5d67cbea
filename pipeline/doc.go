// Package pipeline is the enrichment worker: it consumes unnumbered order
// events, gives each a number from an idgen Numberer through a codec.Format
// (JSON, or Avro and Protobuf through codec/schema), and produces the
// numbered events, dead letters included, exactly once: every poll batch is
// one Kafka transaction of a franz-go GroupTransactSession, with the input
// offsets committed in it.
//
// It holds the Worker and its options, the idempotency store's wiring
// (Idempotency, KeySpec), the worker's metrics and its HTTP endpoints
// (Serve: /metrics, /healthz, /readyz), and Lanes (several workers in one
// process). A service that embeds the numbering passes the loop's
// configuration (eos.Config: brokers, topics, group) and an idgen.Generator
// (Numbers) to NewWorker and calls Run; see the example.
//
// What it does not hold: the numbers themselves (idgen: layouts, the Redis
// sequencer), the byte-level codecs (codec, codec/schema), the
// exactly-once loop it is a step of, with the configuration and the errors
// every product shares (eos, shared with the audit), the audit
// consumer (audit), bounded replays (replay), and the
// reconciliation of input against output (verify). It has no flags: the
// command line is internal/cli.
package pipeline

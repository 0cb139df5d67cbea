// Package schema numbers order events encoded with a schema registry: Avro
// and Protobuf in the Confluent wire format (magic byte 0, a 4-byte
// big-endian schema ID, for Protobuf the message indexes, then the payload).
//
// A [Format] implements [codec.Format], so the worker, replay and the audit
// call it exactly as they call the JSON codec. It fetches each writer schema
// once per ID through franz-go's pkg/sr client, derives and registers the
// output schema once under the output subject, and caches both.
//
// The number is written without re-encoding the record:
//   - Avro, field absent from the writer's top-level record: the output schema
//     is the writer schema plus a last field (type "string" or "long", with a
//     default, so the change is BACKWARD compatible), and the field's encoding
//     is appended to the payload (Avro writes a record's fields in order,
//     with no framing). The payload is walked once, without allocating, to
//     check it decodes with the writer schema and ends where it should.
//   - Avro, field present (for example ["null","string"] with a null
//     default): the same walk finds the field's bytes and only they are
//     replaced; the output schema is the writer schema.
//   - Avro, top-level union of null and inline records: the branch index is
//     read and the branch's record handled as above; every record branch of
//     the output union gets the field.
//   - Protobuf: the payload is checked against the message descriptor and
//     the field's tag and value are appended (for a scalar the last value on
//     the wire wins); the output schema is the writer schema.
//
// Bad input goes to the dead-letter topic, bytes untouched, under the classes
// codec.ClassNotFramed, ClassUnknownSchema, ClassUndecodable,
// ClassNoNumberField and ClassInvalidNumber. A registry that cannot be
// reached or answers 5xx is an error wrapping codec.ErrUnavailable (retry);
// an output schema the registry refuses is an [*IncompatibleError] (fatal).
//
// schema imports no Redis and no Kafka client.
package schema

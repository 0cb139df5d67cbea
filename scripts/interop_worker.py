#!/usr/bin/env python3
"""End-to-end interop with Confluent's Python client (confluent-kafka).

A client the project did not write produces Avro or Protobuf orders to a
real Kafka topic, with Confluent's serializers registering the writer schema
in the schema registry; the flakestream worker numbers them; this script
then reads the numbered topic back (read_committed) with Confluent's
deserializers, which fetch the output schema by the ID in each value.

  interop_worker.py produce avro|protobuf BROKERS TOPIC REGISTRY_URL N
  interop_worker.py consume avro|protobuf BROKERS TOPIC REGISTRY_URL N

produce writes N orders (sku SKU-<i>, partition i mod the topic's
partitions is left to the partitioner) and flushes. consume reads N values
from the beginning of TOPIC (60 s at most) and prints one JSON object a
line: the decoded value and the flakestream-number header. Run it with the
venv from scripts/interop-venv.
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from confluent_kafka import Consumer, Producer  # noqa: E402
from confluent_kafka.schema_registry import SchemaRegistryClient  # noqa: E402
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer  # noqa: E402
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer  # noqa: E402
from confluent_kafka.serialization import MessageField, SerializationContext  # noqa: E402
from google.protobuf.json_format import MessageToDict  # noqa: E402

from interop_codec import AVRO_SCHEMA, order_class  # noqa: E402


def produce(fmt, brokers, topic, client, n):
    ctx = SerializationContext(topic, MessageField.VALUE)
    if fmt == "avro":
        ser = AvroSerializer(client, AVRO_SCHEMA)

        def value(i):
            return ser({"sku": f"SKU-{i}", "qty": i + 1, "note": "gift" if i % 2 else None}, ctx)
    else:
        cls = order_class()
        ser = ProtobufSerializer(cls, client, {"use.deprecated.format": False})

        def value(i):
            return ser(cls(sku=f"SKU-{i}", qty=i + 1), ctx)
    p = Producer({"bootstrap.servers": brokers, "enable.idempotence": True})
    errors = []
    for i in range(n):
        p.produce(topic, key=f"order-{i}".encode(), value=value(i),
                  on_delivery=lambda err, _msg: errors.append(err) if err else None)
        p.poll(0)
    left = p.flush(60)
    if left or errors:
        sys.exit(f"produce: {left} undelivered, errors {errors[:3]}")


def consume(fmt, brokers, topic, client, n):
    ctx = SerializationContext(topic, MessageField.VALUE)
    if fmt == "avro":
        de = AvroDeserializer(client)

        def decode(v):
            return de(v, ctx)
    else:
        de = ProtobufDeserializer(order_class(), {"use.deprecated.format": False}, client)

        def decode(v):
            return MessageToDict(de(v, ctx), preserving_proto_field_name=True)
    c = Consumer({"bootstrap.servers": brokers, "group.id": f"interop-{time.time_ns()}",
                  "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                  "enable.auto.commit": False})
    c.subscribe([topic])
    got, deadline = 0, time.time() + 60
    try:
        while got < n and time.time() < deadline:
            msg = c.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                sys.exit(f"consume: {msg.error()}")
            headers = dict(msg.headers() or [])
            number = headers.get("flakestream-number", b"").decode()
            print(json.dumps({"value": decode(msg.value()), "number": number}, sort_keys=True), flush=True)
            got += 1
    finally:
        c.close()
    if got < n:
        sys.exit(f"consume: {got} of {n} values in 60 s")


def main():
    mode, fmt, brokers, topic, url, n = sys.argv[1:7]
    client = SchemaRegistryClient({"url": url})
    {"produce": produce, "consume": consume}[mode](fmt, brokers, topic, client, int(n))


if __name__ == "__main__":
    main()

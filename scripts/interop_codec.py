#!/usr/bin/env python3
"""Interop check with Confluent's Python serializers (confluent-kafka).

A client the project did not write encodes orders in the Confluent wire
format against a schema registry, and decodes what flakestream numbered.
No broker is involved: values move as hex lines on stdin/stdout.

  interop_codec.py produce avro|protobuf REGISTRY_URL N   > values.hex
  interop_codec.py consume avro|protobuf REGISTRY_URL     < numbered.hex

produce writes N orders for topic "orders" (subject orders-value, registered
by the serializer). consume decodes each value with the deserializer (the
writer schema fetched by the ID in the value) and prints one JSON object a
line. Run it with the venv from scripts/interop-venv.
"""
import json
import sys

from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.json_format import MessageToDict

AVRO_SCHEMA = json.dumps({
    "type": "record", "name": "Order", "namespace": "interop",
    "fields": [
        {"name": "sku", "type": "string"},
        {"name": "qty", "type": "int"},
        {"name": "note", "type": ["null", "string"], "default": None},
    ],
})


def order_class():
    F = descriptor_pb2.FieldDescriptorProto
    fdp = descriptor_pb2.FileDescriptorProto(name="interop/order.proto", package="interop", syntax="proto3")
    m = fdp.message_type.add(name="Order")
    m.field.add(name="sku", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    m.field.add(name="qty", number=2, type=F.TYPE_INT32, label=F.LABEL_OPTIONAL)
    m.field.add(name="order_no", number=3, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("interop.Order"))


def main():
    mode, fmt, url = sys.argv[1], sys.argv[2], sys.argv[3]
    client = SchemaRegistryClient({"url": url})
    if mode == "produce":
        n = int(sys.argv[4])
        ctx = SerializationContext("orders", MessageField.VALUE)
        if fmt == "avro":
            ser = AvroSerializer(client, AVRO_SCHEMA)
            for i in range(n):
                v = ser({"sku": f"SKU-{i}", "qty": i + 1, "note": "gift" if i % 2 else None}, ctx)
                print(v.hex())
        else:
            cls = order_class()
            ser = ProtobufSerializer(cls, client, {"use.deprecated.format": False})
            for i in range(n):
                print(ser(cls(sku=f"SKU-{i}", qty=i + 1), ctx).hex())
    elif mode == "consume":
        ctx = SerializationContext("orders-numbered", MessageField.VALUE)
        if fmt == "avro":
            de = AvroDeserializer(client)
            for line in sys.stdin:
                print(json.dumps(de(bytes.fromhex(line.strip()), ctx), sort_keys=True))
        else:
            de = ProtobufDeserializer(order_class(), {"use.deprecated.format": False}, client)
            for line in sys.stdin:
                msg = de(bytes.fromhex(line.strip()), ctx)
                print(json.dumps(MessageToDict(msg, preserving_proto_field_name=True), sort_keys=True))
    else:
        sys.exit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main()

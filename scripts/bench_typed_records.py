"""What one record costs the HTTP door in Confluent's schema formats (``api/typed_records.py``), per format:
a produced record's JSON value encoded by its schema and framed, and a stored record decoded by its schema
and rendered as the answer's JSON row (the node's side, the schema already parsed).

    .venv/bin/python scripts/bench_typed_records.py [--records 10000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import time

from api.typed_records import encode_records, frame_records, parse_schema_produce, render_rows
from partitions.registry.schema_cache import Registered
from partitions.registry.service import SchemaView
from partitions.registry.types import TYPES
from raftlog.storage.batch import Record

CASES = {  # format: (registry type, schema text, one record's value as REST Proxy's JSON)
    "avro": (
        "AVRO",
        json.dumps(
            {
                "type": "record",
                "name": "Payment",
                "fields": [
                    {"name": "id", "type": "string"},
                    {"name": "amount", "type": "double"},
                    {"name": "note", "type": ["null", "string"]},
                ],
            }
        ),
        {"id": "p-1", "amount": 1.5, "note": {"string": "paid"}},
    ),
    "jsonschema": (
        "JSON",
        json.dumps(
            {
                "type": "object",
                "properties": {
                    "id": {"type": "string"},
                    "amount": {"type": "number"},
                    "note": {"type": "string"},
                },
                "required": ["id", "amount"],
            }
        ),
        {"id": "p-1", "amount": 1.5, "note": "paid"},
    ),
    "protobuf": (
        "PROTOBUF",
        'syntax = "proto3"; message Payment { string id = 1; double amount = 2; string note = 3; }',
        {"id": "p-1", "amount": 1.5, "note": "paid"},
    ),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    for name, (schema_type, text, value) in CASES.items():
        schema = Registered(1, SchemaView(1, "", text, schema_type), TYPES[schema_type].parse(text, {}))
        body = parse_schema_produce({"value_schema_id": 1, "records": [{"value": value}] * args.records}, 0)
        encode_s = decode_s = float("inf")
        for _ in range(args.rounds):  # the best round: the least disturbed by the machine's other work
            started = time.perf_counter()
            produced = frame_records(
                body, encode_records(body, None, schema.parsed), None, 1, name == "protobuf"
            )
            encode_s = min(encode_s, time.perf_counter() - started)
            stored = [Record(i, 0, None, r.value) for i, r in enumerate(produced.records)]
            started = time.perf_counter()
            rendered = render_rows({1: schema}, schema_type, name, [("t", 0, stored)])
            decode_s = min(decode_s, time.perf_counter() - started)
            if rendered.undecodable or len(rendered.rows) != args.records:
                raise SystemExit(f"{name}: {len(rendered.rows)} rows, {rendered.undecodable}")
        per = 1e6 / args.records
        print(
            f"{name:10} encode+frame {encode_s * per:5.1f} us/record   "
            f"decode+render {decode_s * per:5.1f} us/record"
        )


if __name__ == "__main__":
    main()

"""The public HTTP API's wire contract, named once: media types, header names and the error codes a client
acts on. The server (``api/``) imports these names rather than spelling them again, and so does every
client, so the two sides cannot drift apart. ``api/README.md`` and ``GET /openapi.json`` describe them."""

from __future__ import annotations

# -- media types -----------------------------------------------------------------------------------------

JSON_V2 = "application/vnd.kafka.json.v2+json"  # records whose key and value are any JSON
BINARY_V2 = "application/vnd.kafka.binary.v2+json"  # records whose key, value and header values are base64
PLAIN_JSON = "application/json"  # JSON records, and every admin body
KAFKA_V2 = "application/vnd.kafka.v2+json"  # Confluent's content type of consumer-instance requests
RECORD_BATCH = "application/vnd.raftlog.batch.v2"  # one Kafka RecordBatch v2, as stored (ADR 0007, 0011)
LEGACY_RECORD_BATCH = "application/vnd.raftlog.batch.v1"  # the format before v2: refused, naming the new one
COLUMNAR_MSGPACK = "application/vnd.raftlog.columnar.v1+msgpack"  # a fetch page as parallel arrays
COLUMNAR_JSON = "application/vnd.raftlog.columnar.v1+json"  # the same page as JSON, bytes as base64

# -- headers ---------------------------------------------------------------------------------------------

LEADER_HEADER = "X-Raftlog-Leader"  # the node that served the request (comma-separated over several)
HIGH_WATERMARK_HEADER = "X-Raftlog-High-Watermark"  # a fetch's partition end
GENERATION_HEADER = "X-Raftlog-Generation"  # a consumer group's generation, on its records and assignments

# -- error codes a client acts on (the whole table: api/errors.py) ----------------------------------------

UNKNOWN_TOPIC = 40401
UNKNOWN_INSTANCE = 40403  # the consumer instance is gone (evicted, deleted): join again
INSTANCE_EXISTS = 40902  # an earlier attempt whose answer was lost created the instance (Confluent's code)
SEQUENCE_TOO_OLD = 40913  # an idempotent produce the partition already holds: it was written
RECORD_TOO_LARGE = 41301  # a batch (or request) above the topic's max.message.bytes: send less at once
STALE_GENERATION = 40905  # the group rebalanced: read the assignment again
PARTITION_NOT_ASSIGNED = 40906  # not this member's partition (any more)
FENCED_CODES = frozenset({STALE_GENERATION, PARTITION_NOT_ASSIGNED})  # a commit refused after a rebalance
OFFSET_OUT_OF_RANGE = 41601  # the body adds log_start_offset and end_offset
NOT_DONE_CODES = range(50300, 50400)  # 503xx: nothing was done (no leader, overloaded, ...): retry
OUTCOME_UNKNOWN_CODES = range(50400, 50500)  # 504xx: done or not; repeat only what is idempotent


def retriable(error_code: int | None) -> bool:
    """Whether an error is worth repeating (the server marks the same answers ``"retriable": true``):
    503xx always, 504xx where repeating is safe (reads, idempotent produce)."""
    return error_code is not None and (error_code in NOT_DONE_CODES or error_code in OUTCOME_UNKNOWN_CODES)

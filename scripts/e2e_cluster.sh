# Sourced by scripts/e2e_*.sh: Apache Kafka's jars (KAFKA_LIBS) and a fresh `raftlog dev` cluster in a
# temporary directory (DATA) on ports from 18081, stopped and removed when the script exits, and what the
# scripts do with it (topic_create, end_to_end). NAME is the calling script's name, for its errors;
# DEV_ARGS adds `raftlog dev` options.
# shellcheck shell=bash
ROOT=$(pwd)
KAFKA_LIBS=$(ls -d "$ROOT"/.peers/kafka-[0-9]*/libs 2>/dev/null | sort -V | tail -1)
if [ -z "$KAFKA_LIBS" ]; then
    echo "$NAME: no Apache Kafka jars in .peers/: run make test's set-up (scripts/bootstrap.sh)" >&2
    exit 1
fi
DATA=$(mktemp -d)
RAFTLOG="$ROOT/.venv/bin/raftlog"
stop() { "$RAFTLOG" dev stop --data-dir "$DATA/data" >/dev/null 2>&1 || true; rm -rf "$DATA"; }
trap stop EXIT
# shellcheck disable=SC2086  # DEV_ARGS is a list of options
"$RAFTLOG" dev --data-dir "$DATA/data" --base-port 18081 ${DEV_ARGS:-} >"$DATA/dev.log" 2>&1 &
for _ in $(seq 1 120); do
    grep -q "Ctrl-C" "$DATA/dev.log" && break
    sleep 0.5
done
grep -q "Ctrl-C" "$DATA/dev.log" || { cat "$DATA/dev.log" >&2; echo "$NAME: the cluster did not start" >&2; exit 1; }

# topic_create TOPIC REPLICAS: a topic of one partition and REPLICAS replicas.
topic_create() {
    "$RAFTLOG" --server http://127.0.0.1:18081 topic create "$1" --partitions 1 --replication-factor "$2" >/dev/null
}

# end_to_end TOPIC RECORDS: Kafka's EndToEndLatency on TOPIC, RECORDS records of 1 KiB at acks=all; its
# latency lines on one line. If the tool fails, its output goes to stderr and the status is 1: assign it
# (`latencies=$(end_to_end ...)`) so that set -e stops the script.
end_to_end() {
    local output
    output=$(timeout 600 java -Xms64m -cp "$KAFKA_LIBS/*" org.apache.kafka.tools.EndToEndLatency \
        127.0.0.1:19092 "$1" "$2" all 1024 2>&1) || { echo "$output" >&2; return 1; }
    grep -E "Avg latency|Percentiles" <<<"$output" | tr '\n' ' ' || true
}

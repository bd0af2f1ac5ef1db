#!/usr/bin/env bash
# Kafka's EndToEndLatency tool against a fresh `raftlog dev` cluster, on a topic of one replica and one of
# three, alternated: what replication adds to a record's produce-to-consume time, and what one node's own
# path costs (docs/performance.md, "End to end on one replica and on three").
#
#   scripts/e2e_by_replicas.sh [RECORDS] [ROUNDS]     (default 4000 records of 1 KiB, 2 rounds)
#
# Needs `make test`'s set-up (Apache Kafka's jars in .peers/, Java). The cluster runs in a temporary
# directory on ports from 18081 (--base-port) and is stopped at the end; DEV_ARGS adds `raftlog dev`
# options, e.g. DEV_ARGS=--serve-arg=--event-loop=asyncio.
set -euo pipefail
cd "$(dirname "$0")/.."
RECORDS=${1:-4000}
ROUNDS=${2:-2}
NAME=e2e_by_replicas
# shellcheck source=scripts/e2e_cluster.sh
source scripts/e2e_cluster.sh
topic_create e2e-r1 1
topic_create e2e-r3 3
for round in $(seq 1 "$ROUNDS"); do
    for topic in e2e-r3 e2e-r1; do
        latencies=$(end_to_end "$topic" "$RECORDS")
        echo "round $round, $topic: $latencies"
    done
done

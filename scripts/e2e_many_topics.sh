#!/usr/bin/env bash
# Kafka's EndToEndLatency tool (Kafka 4's Java clients: Produce and Fetch v13, topics named by id) on a
# topic of one replica of a fresh `raftlog dev` cluster that also holds TOPICS other topics, printing the
# three nodes' CPU per record beside the tool's latencies, and the time and CPU the other topics took to make (docs/performance.md, "Many topics and a Kafka 4
# client").
#
#   scripts/e2e_many_topics.sh [RECORDS] [TOPICS]     (default 3000 records of 1 KiB, 2000 topics)
#
# Needs `make test`'s set-up (Apache Kafka's jars in .peers/, Java). The cluster runs in a temporary
# directory on ports from 18081 and is stopped at the end; the other topics (one partition, one replica)
# are made with confluent-kafka's AdminClient, 500 a request.
set -euo pipefail
cd "$(dirname "$0")/.."
RECORDS=${1:-3000}
TOPICS=${2:-2000}
NAME=e2e_many_topics
# shellcheck source=scripts/e2e_cluster.sh
source scripts/e2e_cluster.sh
topic_create e2e-r1 1
pids=$(pgrep -f "raftlog_node --node-id n[123] --data-dir $DATA/data/")
cpu_ticks() { local total=0; for pid in $pids; do total=$((total + $(awk '{print $14 + $15}' "/proc/$pid/stat"))); done; echo "$total"; }
hz=$(getconf CLK_TCK)
before=$(cpu_ticks)
"$ROOT/.venv/bin/python" - "$TOPICS" <<'PY'
import sys, time
from confluent_kafka.admin import AdminClient, NewTopic
count = int(sys.argv[1])
admin = AdminClient({"bootstrap.servers": "127.0.0.1:19092"})
began = time.monotonic()
for start in range(0, count, 500):
    names = [f"other-{i}" for i in range(start, min(count, start + 500))]
    for future in admin.create_topics([NewTopic(n, 1, 1) for n in names], request_timeout=120).values():
        future.result()
deadline = time.monotonic() + 300
while len(admin.list_topics(timeout=30).topics) < count + 1:
    if time.monotonic() > deadline:
        sys.exit(f"e2e_many_topics: {count} topics not all listed within 300 s")
    time.sleep(0.5)
print(f"{count} other topics made in {time.monotonic() - began:.1f} s", end="")
PY
echo ", the nodes' CPU meanwhile $(( ($(cpu_ticks) - before) * 1000 / hz )) ms"
before=$(cpu_ticks)
latencies=$(end_to_end e2e-r1 "$RECORDS")
after=$(cpu_ticks)
echo "beside $TOPICS topics: nodes $(( (after - before) * 1000000 / hz / RECORDS )) µs CPU a record; $latencies"

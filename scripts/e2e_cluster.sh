# Sourced by scripts/e2e_*.sh: Apache Kafka's jars (KAFKA_LIBS) and a fresh `raftlog dev` cluster in a
# temporary directory (DATA) on ports from 18081, stopped and removed when the script exits. NAME is the
# calling script's name, for its errors; DEV_ARGS adds `raftlog dev` options.
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

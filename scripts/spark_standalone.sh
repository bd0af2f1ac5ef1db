#!/usr/bin/env bash
# A Spark standalone cluster on 127.0.0.1 from the pip-installed pyspark in .venv: one master and two
# workers (1 core each), so tasks run in executor JVMs of their own, as on a real cluster. The pip package
# has no sbin/start-master.sh, so the daemons are started with bin/spark-class.
#
#   scripts/spark_standalone.sh start     # master on spark://127.0.0.1:${SPARK_MASTER_PORT:-7077}
#   scripts/spark_standalone.sh status
#   scripts/spark_standalone.sh stop
#
# Logs, pids and worker scratch space go to ${SPARK_STANDALONE_DIR:-data/spark-standalone}.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
DIR=${SPARK_STANDALONE_DIR:-$ROOT/data/spark-standalone}
PORT=${SPARK_MASTER_PORT:-7077}
WORKERS=${SPARK_WORKERS:-2}
SPARK_HOME=$(.venv/bin/python -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')
export SPARK_HOME
export PYSPARK_PYTHON=$ROOT/.venv/bin/python   # executors run the project's Python: raftlog_spark importable
export SPARK_LOCAL_IP=127.0.0.1
export SPARK_WORKER_DIR=$DIR/work
mkdir -p "$DIR/work"

running() { [ -f "$DIR/$1.pid" ] && kill -0 "$(cat "$DIR/$1.pid")" 2>/dev/null; }

case "${1:-}" in
start)
    if running master; then echo "already running: spark://127.0.0.1:$PORT"; exit 0; fi
    "$SPARK_HOME/bin/spark-class" org.apache.spark.deploy.master.Master \
        --host 127.0.0.1 --port "$PORT" --webui-port 0 > "$DIR/master.log" 2>&1 &
    echo $! > "$DIR/master.pid"
    for i in $(seq "$WORKERS"); do
        "$SPARK_HOME/bin/spark-class" org.apache.spark.deploy.worker.Worker \
            --host 127.0.0.1 --cores 1 --memory 1g --webui-port 0 "spark://127.0.0.1:$PORT" \
            > "$DIR/worker$i.log" 2>&1 &
        echo $! > "$DIR/worker$i.pid"
    done
    for _ in $(seq 120); do   # bounded: up to 60 s for every worker to register
        registered=$(cat "$DIR"/worker*.log 2>/dev/null | grep -c "Successfully registered with master" || true)
        [ "$registered" -ge "$WORKERS" ] && break
        sleep 0.5
    done
    if [ "$registered" -lt "$WORKERS" ]; then
        echo "only $registered of $WORKERS workers registered; see $DIR/*.log" >&2
        exit 1
    fi
    echo "master spark://127.0.0.1:$PORT with $WORKERS workers (logs in $DIR)" ;;
status)
    for name in master $(for i in $(seq "$WORKERS"); do echo "worker$i"; done); do
        if running "$name"; then echo "$name: running (pid $(cat "$DIR/$name.pid"))"; else echo "$name: stopped"; fi
    done ;;
stop)
    for name in $(for i in $(seq "$WORKERS"); do echo "worker$i"; done) master; do
        if running "$name"; then kill "$(cat "$DIR/$name.pid")"; fi
        rm -f "$DIR/$name.pid"
    done
    echo "stopped" ;;
*)
    echo "usage: $0 start|status|stop" >&2
    exit 2 ;;
esac

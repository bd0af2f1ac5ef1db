#!/usr/bin/env bash
# Creates .venv and installs the project from the project's own files only, at one of two levels:
#   scripts/bootstrap.sh cluster   what a node needs (make dev): raftlog and its dependencies; a C compiler
#                                  and Python's headers build the record reader; the web console's chart
#                                  library from the npm registry (npm ci in api/console)
#   scripts/bootstrap.sh [test]    that, plus what the tests use (make test): the dev and Spark extras,
#                                  quixstreams in .venv/quixstreams, Debian's kcat, zsh, fish, fuse3,
#                                  iproute2, e2fsprogs and promtool, as users run them, Debian's Chromium (the web console's
#                                  browser tests drive it with the dev extra's Playwright), Apache Kafka's jars (the broker, its tools,
#                                  Kafka Connect's worker and FileStream connectors, Kafka Streams) from Maven Central
#                                  (scripts/kafka/install.sh), Spark's own Kafka source and sink from there
#                                  too (scripts/spark_kafka/install.sh), Apache Avro's Java library
#                                  (scripts/avro/install.sh) and a Go toolchain
#                                  (scripts/go_toolchain.sh)
# Every Python package at the version scripts/python-constraints.txt pins (make lock moves them), so a
# fresh clone runs what was last tested. Re-runs pip only when pyproject.toml or the constraints changed
# since the last successful install of that level ...
set -euo pipefail
cd "$(dirname "$0")/.."
LEVEL=${1:-test}
case "$LEVEL" in
    cluster) EXTRAS="" ;;
    test) EXTRAS="[dev,spark]" ;;
    *) echo "bootstrap: unknown level '$LEVEL' (cluster or test)" >&2; exit 2 ;;
esac
PYTHON=${PYTHON:-python3}
if ! "$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)'; then
    echo "bootstrap: Python >= 3.11 is required (found $("$PYTHON" --version 2>&1))" >&2
    exit 1
fi
if [ ! -x .venv/bin/python ]; then
    echo "bootstrap: creating .venv" >&2
    "$PYTHON" -m venv .venv
fi
. scripts/debian_tool.sh  # debian_tool: a Debian tool installed with apt-get when missing
# The record reader (raftlog/storage/_records.c) is compiled by pip: a C compiler and Python's headers
debian_tool bootstrap gcc
if ! "$PYTHON" -c 'import os, sys, sysconfig; sys.exit(not os.path.exists(sysconfig.get_paths()["include"] + "/Python.h"))'; then
    debian_tool bootstrap python3-config python3-dev
fi
# Packages go in with uv (from PyPI, into .venv, at UV_VERSION): the same pinned versions as pip, in
# about two fifths of the time (a fresh clone's first install: 26 s against pip's 64 s). pip stays the
# fallback: where uv cannot be had or fails, pip installs what is asked. Their byte-code is compiled
# here, as pip does: uv leaves it to the first import, and a fresh clone's six test workers each compiled
# the same libraries at once (their start took 55 s instead of about 10).
UV_VERSION=0.13.9
ensure_uv() {  # uv at UV_VERSION in .venv, when pip can have it
    case "$(.venv/bin/uv --version 2>/dev/null)" in  # "uv 0.13.9 (x86_64-unknown-linux-gnu)"
        "uv $UV_VERSION" | "uv $UV_VERSION "*) ;;
        *) .venv/bin/python -m pip install --quiet --disable-pip-version-check "uv==$UV_VERSION" >&2 || true ;;
    esac
}
python_install() {  # python_install PYTHON ARGS...: ``pip install ARGS`` into PYTHON's environment
    local python=$1
    shift
    ensure_uv
    if [ -x .venv/bin/uv ] && .venv/bin/uv pip install --compile-bytecode --python "$python" "$@" >&2; then
        return 0
    fi
    [ -x .venv/bin/uv ] && echo "bootstrap: uv did not install it; pip does" >&2
    "$python" -m pip install --quiet --upgrade pip
    "$python" -m pip install --progress-bar on "$@" >&2
}
# quixstreams, the stream processor of tests/kafka_api/test_quixstreams.py: every release pins a
# confluent-kafka older than the tests' own, so it gets a virtualenv of its own inside .venv, reinstalled
# when its requirements or their pinned versions change; beside the main install (uv's cache takes both)
install_quixstreams() {
    local requirements=examples/quixstreams-requirements.txt constraints=examples/quixstreams-constraints.txt
    local stamp
    stamp=.venv/quixstreams/.installed-$(cat "$requirements" "$constraints" | sha256sum | cut -c1-16)
    [ -f "$stamp" ] && return 0
    echo "bootstrap: installing quixstreams into .venv/quixstreams (the first time: ~130 MB)" >&2
    if [ -x .venv/bin/uv ]; then
        .venv/bin/uv venv --quiet --allow-existing --seed --python "$PYTHON" .venv/quixstreams
    else
        "$PYTHON" -m venv .venv/quixstreams
    fi
    python_install .venv/quixstreams/bin/python -c "$constraints" -r "$requirements"
    rm -f .venv/quixstreams/.installed-*
    touch "$stamp"
}
# The test level's downloads run side by side where they share no lock, while this shell installs the
# Python packages (a fresh clone's set-up took 96 s one step after another): Debian's packages first, one
# at a time (apt-get holds one lock); then three chains: Maven's local repository (Kafka's and Avro's jars;
# Spark's connector waits for pyspark below), the Go client and npm suites of tests/registry/judges.py,
# and quixstreams' own virtualenv. Each chain's messages come as it goes; a chain that fails fails the
# set-up, naming it.
side_pids=()
start_side() {  # start_side COMMAND...: COMMAND in the background, in a process group of its own
    setsid "$@" &
    side_pids+=("$!")
}
finish_side() {  # finish_side PID WHAT: waits for a chain; exits naming WHAT when it failed
    local code=0
    wait "$1" || code=$?
    if [ "$code" -ne 0 ]; then
        echo "bootstrap: $2 failed (exit $code)" >&2
        exit 1
    fi
}
stop_sides() {  # a set-up that stops early stops its chains and their children
    local pid
    for pid in "${side_pids[@]}"; do kill -TERM -- "-$pid" 2>/dev/null || true; done
}
trap stop_sides EXIT
trap 'exit 130' INT TERM  # an interrupted set-up leaves through the EXIT trap too
if [ "$LEVEL" = test ]; then
    # Debian packages the tests use as users run them: kcat (the Kafka listener), zsh and fish (raftlog
    # completion)
    debian_tool bootstrap kcat
    debian_tool bootstrap zsh
    debian_tool bootstrap fish
    # fusermount3 and libfuse 3 (Debian's fuse3): the fault harness's lazy file system (jepsen run --fs lazy)
    debian_tool bootstrap fusermount3 fuse3
    # The other faults' tools (tests/required_tools.py fails a test that lacks one, naming it): iproute2's
    # ip and tc (network namespaces: partition, delay, loss) and e2fsprogs' mkfs.ext4 with mount (the
    # disk-full fault's loop-mounted disks); root and the kernel give namespaces, /dev/fuse and loop devices
    debian_tool bootstrap ip iproute2
    debian_tool bootstrap tc iproute2
    debian_tool bootstrap mkfs.ext4 e2fsprogs
    debian_tool bootstrap mount mount
    # Debian's Chromium: the web console's tests (tests/console) drive it headless through Playwright (the
    # dev extra); Playwright's own browser download is never used
    debian_tool bootstrap chromium
    # what the chains run: Java 17 and Maven, npm and node
    debian_tool bootstrap java openjdk-17-jre-headless
    debian_tool bootstrap mvn maven
    debian_tool bootstrap npm
    # Apache Kafka, Kafka Connect and Kafka Streams from Maven Central: the peer the tests run beside
    # raftlog, and the Connect worker and Streams application they run against both; then Apache Avro's
    # Java library, against which the registry's Avro type is checked
    start_side bash -c 'scripts/kafka/install.sh && scripts/avro/install.sh'
    maven_chain=$!
    # A Go toolchain for the Go clients (the machine's, or the module proxy's), then other authors'
    # schema-registry suites the registry's tests run unchanged: Confluent's Go client from the Go module
    # proxy, built; its JavaScript client and Jest from npm, into .peers. Beside the npm install, the
    # tests' Go client (franz-go) is compiled into Go's build cache, where the tests then find its build: its
    # ~20 CPU seconds on a fresh clone are spent while the set-up waits on npm, not among the tests' busy
    # workers (after the Go judge, whose build leaves the standard library compiled: beside it, both
    # compiled it at once and the chain, the set-up's longest, took 19 s more)
    start_side bash -c 'go=$(scripts/go_toolchain.sh) || exit
        judges() { .venv/bin/python tests/registry/judges.py install --suite "$1"; }
        judges confluent-kafka-go || exit
        (cd tests/kafka_reference/go && "$go" build -o /dev/null .) & client=$!
        judges confluent-kafka-javascript && wait "$client"'
    judges_chain=$!
    ensure_uv
    export PYTHON UV_VERSION
    export -f install_quixstreams python_install ensure_uv
    start_side bash -c 'set -euo pipefail; install_quixstreams'
    quix_chain=$!
fi
# The Python packages: again only when pyproject.toml or the constraints changed since the last
# successful install of this level, or the C source of the record reader changed, or its build is gone
# (pip or uv builds it in place)
sources=$(cat pyproject.toml scripts/python-constraints.txt raftlog/storage/_records.c | sha256sum | cut -c1-16)
stamp=.venv/.installed-$LEVEL-$sources
if [ ! -f "$stamp" ] || ! ls raftlog/storage/_records.*.so >/dev/null 2>&1; then
    # the test level's first run downloads ~1.2 GB (pyspark is most of it): the installer shows what it
    # resolves, downloads and builds as it goes, so a long set-up is seen to move
    if [ "$LEVEL" = test ]; then size="~1.2 GB"; else size="~100 MB"; fi
    echo "bootstrap: installing raftlog$EXTRAS and its dependencies into .venv (the first time: $size)" >&2
    python_install .venv/bin/python -c scripts/python-constraints.txt -e ".$EXTRAS"
    rm -f .venv/.installed-*
    touch "$stamp"
    if [ "$LEVEL" = test ]; then touch ".venv/.installed-cluster-$sources"; fi  # the test level holds it
fi
# The web console's chart library (uPlot) from the npm registry, as api/console/package-lock.json pins it:
# every node serves it under /console/vendor/, so nothing is fetched at run time (npm from Debian if missing)
console_lock=$(sha256sum api/console/package-lock.json | cut -c1-16)
if [ ! -f "api/console/node_modules/.installed-$console_lock" ]; then
    debian_tool bootstrap npm
    echo "bootstrap: installing the console's assets (npm ci in api/console)" >&2
    (cd api/console && npm ci --no-audit --no-fund --loglevel=error >&2)
    touch "api/console/node_modules/.installed-$console_lock"
fi
[ "$LEVEL" = test ] || exit 0  # a node needs nothing more
# Spark's own Kafka source and sink (spark-sql-kafka-0-10) from Maven Central, for spark.jars: its version
# follows the pyspark just installed, and it shares Maven's repository with the first chain
finish_side "$maven_chain" "installing Kafka's and Avro's jars (scripts/kafka/install.sh, scripts/avro/install.sh)"
scripts/spark_kafka/install.sh .venv/bin/python
# Spark's Python workers import pyspark from pyspark.zip, where Python writes no bytecode: compiled once here
# (0.85 -> 0.4 CPU seconds a worker; a data source's workers must connect back to Spark within 10 s)
.venv/bin/python scripts/spark_zip_bytecode.py
# promtool (from Debian's prometheus package, unpacked into .venv/bin: no service installed or started):
# the scrape config and alert rules of docs/metrics.md, and a node's /metrics page, are checked with it.
if [ ! -x .venv/bin/promtool ]; then
    if ! command -v apt-get >/dev/null 2>&1 || ! command -v dpkg-deb >/dev/null 2>&1; then
        echo "bootstrap: promtool is missing; put Prometheus's promtool at .venv/bin/promtool and run again" >&2
        exit 1
    fi
    echo "bootstrap: fetching promtool (Debian's prometheus package, unpacked into .venv/bin)" >&2
    work=$(mktemp -d)
    trap 'rm -rf "$work"; stop_sides' EXIT  # the folder goes also when a step below fails
    (cd "$work" && { apt-get download prometheus >/dev/null 2>&1 || {
        apt-get update -qq && apt-get download prometheus >/dev/null 2>&1; }; })
    dpkg-deb -x "$work"/prometheus_*.deb "$work/unpacked"
    install -m 0755 "$work/unpacked/usr/bin/promtool" .venv/bin/promtool
    rm -rf "$work"
fi
finish_side "$quix_chain" "installing quixstreams into .venv/quixstreams"
finish_side "$judges_chain" "installing the registry's judges and building the Go client (scripts/go_toolchain.sh, tests/registry/judges.py install, tests/kafka_reference/go)"

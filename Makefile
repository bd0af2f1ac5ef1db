# The two set-up commands of the README: `make dev` (run the local cluster) and `make test` (everything CI runs).
.PHONY: dev examples lock test lint typecheck unit unit-fast kafka-answers bootstrap bootstrap-cluster bench-storage bench-spark bench-setup bench-compare jepsen-short jepsen jepsen-compact jepsen-txn franz-go jepsen-groups jepsen-upgrade

# What the tests need (test tools, the Spark extra, kcat, zsh, fish, fuse3, Chromium, promtool) ...
bootstrap:
	@scripts/bootstrap.sh test

# ... and what a node needs, no more: make dev installs nothing that only the tests use.
bootstrap-cluster:
	@scripts/bootstrap.sh cluster

dev: bootstrap-cluster
	.venv/bin/raftlog dev

# What the README's examples import beside the node (confluent-kafka, kafka-python, PySpark with pyarrow
# and pandas: the examples extra), into the same .venv; make test's set-up holds them too.
examples: bootstrap-cluster
	.venv/bin/python -m pip install --progress-bar on -c scripts/python-constraints.txt -e '.[examples]'

# The Python packages' versions afresh from PyPI, into scripts/python-constraints.txt and
# examples/quixstreams-constraints.txt (what bootstrap installs); then make test and make kafka-answers.
lock:
	scripts/lock_python.sh

lint: bootstrap
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .

typecheck: bootstrap
	.venv/bin/mypy raftlog partitions membership api raftlog_client raftlog_contract raftlog_bench raftlog_cli jepsen raftlog_spark kafka_api raftlog_node raftlog_dev

# Byte-code caches stay on for the tests even where the environment turns them off
# (PYTHONDONTWRITEBYTECODE=1): otherwise each worker's collection rewrites and compiles every test module
# again, and every node and command process the tests start compiles the project's modules from source
# (about a third of a node's start-up CPU). __pycache__ is git-ignored.
TEST_ENV = PYTHONDONTWRITEBYTECODE=

# Six workers (pytest-xdist) on two cores, whole files each: a file's fixtures start once; ports:
# tests/conftest.py. Most of a worker's time is spent waiting on the processes it started (nodes, JVMs,
# browsers), so more workers than cores keep the two cores busy: six used nine tenths of the machine in a
# quiet run (11.0 to 11.9 minutes) where four used four fifths (12.2 to 14.5 minutes, the machine's speed varies
# by the hour) and two 18.6; eight spent more CPU on the same work (14.1 minutes) and starved Spark's
# Python workers past the 10 s Spark gives them to connect. Loaded with four CPU-bound processes: see
# docs/testing.md. Loaded six-worker runs took up to 5.6 GiB more than the idle machine at their peak: a machine
# with less than 10 GiB available runs two (WORKERS=N chooses).
# On a fresh clone tests/warm_rewrites.py first writes pytest's rewritten byte-code of every test module,
# the byte-code of what they import and hypothesis's caches once (about 20 s of one core, beside mypy),
# which the six workers would otherwise each write at once (11 CPU s a worker).
# The units go out dearest first (tests/file_costs.json, in collection order: --no-loadscope-reorder) so
# the workers finish together.
WORKERS ?= $(shell awk '/MemAvailable/ {print ($$2 >= 10 * 1024 * 1024) ? 6 : 2}' \
	/proc/meminfo 2>/dev/null || echo 2)
unit: bootstrap
	$(TEST_ENV) .venv/bin/python tests/warm_rewrites.py
	env -u MAKEFLAGS -u MFLAGS $(TEST_ENV) .venv/bin/python -m pytest -q -n $(WORKERS) --dist loadfile --no-loadscope-reorder --durations=15

# The quick tier while working: only the files that cost under FAST_FILE_S seconds each in the last whole
# run (tests/file_costs.json; no application scenario, no JVM, no browser), a few minutes on 2 cores. Two
# workers: these files keep the cores busy themselves, and every worker collects every file first.
FAST_FILE_S ?= 10
unit-fast: bootstrap
	$(TEST_ENV) .venv/bin/python tests/warm_rewrites.py
	$(TEST_ENV) .venv/bin/python -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder --files-under $(FAST_FILE_S)

# mypy checks beside the tests, not before them: on a fresh clone (no .mypy_cache) it takes 30 to 90 s of
# one core, which the tests' first minutes share; make still fails when either does. The tests' own make
# calls do not join this make's jobs (MAKEFLAGS unset in unit's recipe).
test: lint
	@$(MAKE) --no-print-directory -j2 typecheck unit

# Apache Kafka's side of the differential tests (tests/kafka_reference), run live and recorded afresh in
# tests/kafka_reference/kafka_answers.json, and Kafka's histories of the fault harness's checker controls
# in tests/jepsen/kafka_histories/ (commit them): the suite replays a test's Kafka side while Kafka
# passed it as it is now, and runs it live where anything it reaches changed (tests/kafka_side.py).
kafka-answers: bootstrap
	RAFTLOG_KAFKA_ANSWERS=record $(TEST_ENV) .venv/bin/python -m pytest -q -n 0 -p no:randomly -m kafka_answer \
		-k "kafka and not raftlog" tests/kafka_reference
	RAFTLOG_KAFKA_ANSWERS=record $(TEST_ENV) .venv/bin/python -m pytest -q -n 0 -p no:randomly \
		tests/jepsen/test_jepsen_kafka.py

bench-storage: bootstrap
	.venv/bin/raftlog bench storage

# Spark connector: 3-node cluster, 1M small records; batch read rows/s and MB/s (JSON vs columnar fetch,
# and Spark's own Kafka source against the Kafka listeners) and streaming write rows/s.
bench-spark: bootstrap
	.venv/bin/python -m raftlog_spark.bench

# The peers of the side-by-side benchmark (pip extra `bench`, Debian rabbitmq-server; needs root).
bench-setup:
	scripts/bench_peers_setup.sh

# raftlog beside Apache Kafka (acked before fsync, and flush.messages=1), NATS JetStream and RabbitMQ
# streams, same workload, one run (raftlog and Kafka through the same confluent-kafka client); table +
# bench-compare.json.
bench-compare: bench-setup
	.venv/bin/raftlog bench perf --compare kafka,kafka-fsync,nats,rabbitmq --record-size 100,1024 \
		--idle-partitions 100 --restart-mib 1024 --wait-quiet 20 --json bench-compare.json

# A short fault run (about a minute: 3 nodes, kill + pause + partition; root for the partitions; HTTP and
# Kafka clients in turn) into runs/.
# `make test` runs the same through tests/jepsen/test_jepsen_runner.py. Longer runs: see docs/testing.md.
jepsen-short: bootstrap
	.venv/bin/python -m jepsen run --nodes 3 --nemesis kill,pause,partition --time-limit 45 --clients http,kafka --dir runs

# A longer run with every fault on 5 nodes.
jepsen: bootstrap
	.venv/bin/python -m jepsen run --nodes 5 --nemesis all --time-limit 300 --clients http,kafka --dir runs

# Compaction under every fault: keys overwritten and deleted on a compacted topic, each key's last
# acknowledged write checked after the cleaners ran (tests/jepsen/test_jepsen_compact_run.py runs a short one
# in make test); then the lazy file systems' power losses, which `all` leaves out (it has disk-full).
jepsen-compact: bootstrap
	.venv/bin/python -m jepsen run --workload compact --nodes 3 --nemesis all --time-limit 120 --clients http,kafka --dir runs
	.venv/bin/python -m jepsen run --workload compact --nodes 3 --fs lazy --time-limit 120 --clients http,kafka --dir runs \
		--nemesis node-power-loss,cluster-power-loss,kill,pause,partition

# Transactions under every fault: transactional producers, read_committed readers and consume-transform-
# produce with offsets through confluent-kafka, checked by jepsen/txn_checker.py (tests/jepsen/
# test_jepsen_txn_run.py runs a short one in make test, and the negative control: --break-markers
# flip-abort must come out invalid); then the lazy file systems' power losses, which `all` leaves out.
jepsen-txn: bootstrap
	.venv/bin/python -m jepsen run --workload txn --nodes 3 --nemesis all --time-limit 120 --clients kafka --dir runs
	.venv/bin/python -m jepsen run --workload txn --nodes 3 --fs lazy --time-limit 120 --clients kafka --dir runs \
		--nemesis node-power-loss,cluster-power-loss,kill,pause,partition

# franz-go v1.21.5's own integration suite (pkg/kgo, unchanged; from the Go module proxy through
# scripts/franz_go/go.mod) against a 3-node raftlog, then a 3-node Apache Kafka (scripts/kafka/pom.xml's version); a table per test and
# a verdict against scripts/franz_go/expected.json (what the suite does on Kafka on a quiet machine, recorded
# by `scripts/franz_go_suite.py --record`), whatever Kafka did in the same run: FAIL (exit 1) unless raftlog
# ended every listed test and passed each one Kafka passes there; INCONCLUSIVE (exit 1) when raftlog did and
# the Kafka run beside it did not. Not in make test (about 25 min). FRANZ_GO_ARGS="--burners 4 --kill":
# 4 CPU-bound processes during both runs, and a node SIGKILLed and restarted during TestGroupETL and
# TestTxnEtl on either system (a kill not seen landing within its test fails the run).
FRANZ_GO_ARGS ?=
franz-go: bootstrap
	scripts/kafka/install.sh
	.venv/bin/python scripts/franz_go_suite.py $(FRANZ_GO_ARGS)

# One classic consumer group through coordinator kills: producers, three members and a monitor through
# confluent-kafka, checked by jepsen/group_checker.py (tests/jepsen/test_jepsen_group_run.py runs the
# first line's faults for 28 s in make test); then every fault, kill-coordinator among them.
jepsen-groups: bootstrap
	.venv/bin/python -m jepsen run --workload group --nodes 3 --nemesis kill-coordinator,kill,pause,partition \
		--time-limit 120 --dir runs
	.venv/bin/python -m jepsen run --workload group --nodes 3 --nemesis all --time-limit 120 --dir runs

# The upgrade fault beside kill and pause: a node at a time restarted on the previous release's code (built
# under .releases/ by raftlog_dev.releases) on the same data, and back (tests/jepsen/test_jepsen_upgrade_fault.py
# runs the fault alone for 12 s in make test).
jepsen-upgrade: bootstrap
	.venv/bin/python -m jepsen run --nodes 3 --nemesis upgrade,kill,pause --time-limit 120 --clients http,kafka --dir runs

# The two set-up commands of the README: `make dev` (run the local cluster) and `make test` (everything CI runs).
.PHONY: dev test lint typecheck unit bootstrap bench-storage

bootstrap:
	@scripts/bootstrap.sh

dev: bootstrap
	.venv/bin/raftlog dev

lint: bootstrap
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .

typecheck: bootstrap
	.venv/bin/mypy raftlog partitions api membership

unit: bootstrap
	.venv/bin/python -m pytest -q --durations=15

test: lint typecheck unit

bench-storage: bootstrap
	.venv/bin/raftlog bench storage

# The README's two commands. Both install what is missing first (scripts/setup.sh).
.PHONY: setup demo test lint unit integration chaos

setup:
	@scripts/setup.sh

demo: setup
	.venv/bin/minibroker demo

lint: setup
	.venv/bin/ruff check .
	.venv/bin/mypy

test: lint
	.venv/bin/pytest -q

unit: setup
	.venv/bin/pytest -q tests/unit

integration: setup
	.venv/bin/pytest -q tests/integration

chaos: setup
	.venv/bin/minibroker chaos run

# The README's two commands. Both install what is missing first (scripts/setup.sh).
.PHONY: setup demo test lint unit integration system chaos

setup:
	@scripts/setup.sh

demo: setup
	.venv/bin/minibroker demo

lint: setup
	.venv/bin/ruff check .
	.venv/bin/mypy
	.venv/bin/lint-imports

# The suite (unit and integration tests on local processes), then the docker-compose system test,
# which prepares a container runtime where it can and says loudly that it did not run where it cannot.
test: lint
	.venv/bin/pytest -q --durations=30
	scripts/compose_system_test.sh

unit: setup
	.venv/bin/pytest -q tests/unit

integration: setup
	.venv/bin/pytest -q tests/integration

system: setup
	scripts/compose_system_test.sh

chaos: setup
	.venv/bin/minibroker chaos run

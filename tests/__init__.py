"""The test suite: tests/unit, tests/integration, tests/system (the layout: tests/README.md); shared fakes in
tests/fakes.py."""

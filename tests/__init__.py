"""The test suite: tests/unit, tests/integration, tests/system; shared fakes in tests/fakes.py."""

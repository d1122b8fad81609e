"""Runs confluent-kafka's kafkatest `verifiable_consumer.py` (the consumer Apache Kafka's system tests drive: it
prints its rebalances, consumed ranges and commits as JSON lines) under Python 3, unchanged:

    python tests/integration/kafkatest_py3.py --topic t --group-id g --broker-list H:P [its other options]

The kafkatest package in the confluent-kafka wheel is Python 2 code: `from verifiable_client import ...` (an
implicit relative import) and `args.iteritems()` in VerifiableClient.set_config. This launcher puts the kafkatest
directory on sys.path and hands set_config a dict that has iteritems; nothing else is touched.
(verifiable_producer.py is not run: it also puts the record's bytes into json.dumps, which Python 3 refuses.)
"""

from __future__ import annotations

import runpy
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import confluent_kafka.kafkatest

KAFKATEST = Path(confluent_kafka.kafkatest.__file__).parent


class _Py2Dict(dict[str, Any]):
    def iteritems(self) -> Iterator[tuple[str, Any]]:
        return iter(self.items())


def main() -> None:
    sys.path.insert(0, str(KAFKATEST))
    import verifiable_client  # type: ignore[import-not-found]

    set_config = verifiable_client.VerifiableClient.set_config
    verifiable_client.VerifiableClient.set_config = staticmethod(
        lambda conf, args: set_config(conf, _Py2Dict(args)))
    script = KAFKATEST / "verifiable_consumer.py"
    sys.argv = [str(script), *sys.argv[1:]]
    runpy.run_path(str(script), run_name="__main__")


if __name__ == "__main__":
    main()

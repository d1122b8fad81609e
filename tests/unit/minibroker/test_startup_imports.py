"""What a process imports to start: the client package only on first use of `minibroker.Producer` & co., and
one command's modules for one `minibroker` command."""

from __future__ import annotations

import subprocess
import sys

import pytest


def _python(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_broker_command_does_not_import_the_client() -> None:
    assert _python("import sys, minibroker.commands.broker; print('client' in sys.modules)") == "False"


def test_one_command_imports_its_own_module_and_not_the_others() -> None:
    out = _python("import sys; from minibroker.cli import COMMAND_MODULES, build_parser;"
                  " build_parser('console-producer');"
                  " print([m for m in COMMAND_MODULES if m in sys.modules],"
                  " 'broker.server.kafka_server' in sys.modules)")
    assert out == "['minibroker.commands.console_producer'] False"


def test_each_command_module_registers_the_command_named_after_it() -> None:
    from minibroker.cli import COMMAND_MODULES, build_parser, command_name

    for module in COMMAND_MODULES:
        subparsers = build_parser(command_name(module))._subparsers
        assert subparsers is not None
        (action,) = subparsers._group_actions
        assert list(action.choices) == [command_name(module)], module  # type: ignore[attr-defined]


def test_a_broker_does_not_import_hypothesis_through_kio() -> None:
    assert _python("import sys, minibroker.commands.broker; print('hypothesis' in sys.modules)") == "False"


def test_the_client_imports_kio_only_when_a_group_member_needs_it() -> None:
    # kio pulls in hypothesis (~1.5 s): ConsumerProtocol bytes load it on first use.
    assert _python("import sys, client; print('kio' in sys.modules)") == "False"


def test_package_still_exports_the_client_on_first_use() -> None:
    out = _python("import sys, minibroker; from minibroker import Producer, Consumer, Admin, NewTopic, TopicPartition;"
                  " import client; print(Producer is client.Producer and minibroker.Admin is client.Admin)")
    assert out == "True"


def test_unknown_attribute_is_an_attribute_error() -> None:
    import minibroker

    with pytest.raises(AttributeError, match="has no attribute 'Nope'"):
        minibroker.Nope  # noqa: B018

"""message.format.version's values, as Kafka 3's ApiVersion reads them, and which ones its MessageFormatVersion
warns about (a format older than v2)."""

from __future__ import annotations

import pytest

from broker.config import message_format


@pytest.mark.parametrize(("text", "release"), [
    ("0.10.0", "0.10.0"), ("0.10.0-IV1", "0.10.0"), ("0.10.0.1", "0.10.0"), ("2.8", "2.8"), ("2.8.1", "2.8"),
    ("2.8-IV1", "2.8"), ("3.0-IV1", "3.0"), ("0.8.2", "0.8.2"),
])
def test_a_version_names_its_release(text: str, release: str) -> None:
    assert message_format.release_of(text) == release


@pytest.mark.parametrize("text", ["abc", "2.9", "3.0-IV2", "0.8.2-IV0", "", "4.0"])
def test_a_version_kafka_does_not_know_is_refused_with_its_message(text: str) -> None:
    assert message_format.validate(text) == f"Version `{text}` is not a valid version"


def test_only_formats_before_v2_are_warned_about() -> None:
    assert message_format.precedes_v2("0.10.2") and message_format.precedes_v2("0.9.0")
    assert not message_format.precedes_v2("0.11.0") and not message_format.precedes_v2("2.8")

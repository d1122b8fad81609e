"""`message.format.version` (topic) and `log.message.format.version` (broker): accepted and ignored, as Kafka 3
does from inter-broker protocol 3.0 (KIP-724): every batch is written as RecordBatch v2 whatever they say.

The value must still be a version Kafka knows (its ApiVersionValidator), and one naming a format older than v2
(before 0.11.0) is warned about, with Kafka's MessageFormatVersion messages, since a user who set it expects a
down-conversion that no longer happens.
"""

from __future__ import annotations

import re

# The inter-broker protocol this broker behaves as: the one at which Kafka starts ignoring the format version.
INTER_BROKER_PROTOCOL_VERSION = "3.0-IV1"
DEFAULT_MESSAGE_FORMAT_VERSION = INTER_BROKER_PROTOCOL_VERSION

# Kafka's ApiVersion releases up to 3.0, each with its highest internal version (-IVn); the ones before 0.10.0
# had none.
_RELEASES: dict[str, int | None] = {
    "0.8.0": None, "0.8.1": None, "0.8.2": None, "0.9.0": None,
    "0.10.0": 1, "0.10.1": 2, "0.10.2": 0, "0.11.0": 2,
    "1.0": 0, "1.1": 0, "2.0": 1, "2.1": 2, "2.2": 1, "2.3": 1, "2.4": 1, "2.5": 0, "2.6": 0, "2.7": 2, "2.8": 1,
    "3.0": 1,
}
# RecordBatch v2 (magic 2) came with 0.11.0.
_FIRST_V2_RELEASE = "0.11.0"
_INTERNAL_VERSION = re.compile(r"(.*)-IV(\d+)")


def release_of(text: str) -> str:
    """The release a version string names (Kafka's ApiVersion.apply: `2.8.1` is 2.8, `0.10.0.1` is 0.10.0, and
    `2.8-IV1` must be an internal version 2.8 had); ValueError with Kafka's message if it names none."""
    version = text.strip()
    internal = _INTERNAL_VERSION.fullmatch(version)
    if internal is not None:
        release, iv = internal.group(1), int(internal.group(2))
        highest = _RELEASES.get(release)
        if highest is not None and iv <= highest:
            return release
    else:
        segments = version.split(".")
        release = ".".join(segments[:3] if version.startswith("0.") else segments[:2])
        if release in _RELEASES:
            return release
    raise ValueError(f"Version `{text}` is not a valid version")


def validate(text: str) -> str | None:
    """A config validator: why `text` is not a message format version, or None."""
    try:
        release_of(text)
    except ValueError as e:
        return str(e)
    return None


def precedes_v2(text: str) -> bool:
    """Kafka's MessageFormatVersion.shouldWarn at inter-broker protocol 3.0: the version names a format
    older than RecordBatch v2."""
    release = release_of(text)
    return tuple(map(int, release.split("."))) < tuple(map(int, _FIRST_V2_RELEASE.split(".")))


def topic_warning(topic: str, text: str) -> str:
    return (f"Topic configuration message.format.version with value `{text}` is ignored for `{topic}` because the "
            f"inter-broker protocol version `{INTER_BROKER_PROTOCOL_VERSION}` is greater or equal than 3.0. This "
            "configuration is deprecated and it will be removed in Apache Kafka 4.0.")


def broker_warning(text: str) -> str:
    return (f"Broker configuration log.message.format.version with value {text} is ignored because the "
            f"inter-broker protocol version `{INTER_BROKER_PROTOCOL_VERSION}` is greater or equal than 3.0. This "
            "configuration is deprecated and it will be removed in Apache Kafka 4.0.")

"""The config files `minibroker cluster up` writes in a data dir, and what it reads back from them.

A broker's `broker-<id>/server.properties` (and a controller's
`controller-<id>/controller.properties`) is the user's to edit: on a data dir
that has one, `cluster up` starts the process on it as it is, changing only the
keys it must (`zookeeper.connect` when ZooKeeper moved, `listeners` for a new
`--port-base`, the keys of this run's `--override`) in place, so comments,
order and every other key stay. The files hold the cluster credential, so
they are readable by their owner only.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from common.config import GRPC_LISTENER_NAME, ConfigError, parse_endpoints
from common.properties import PropertiesSyntaxError, format_properties, load_properties, update_properties

CREDENTIAL = "cluster.credential"


def write_config(path: Path, props: Mapping[str, str]) -> list[str]:
    """Create `path` with `props`, or set those of `props` that differ in the file it is; returns the keys
    changed in an existing file (none: the file is untouched)."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        write_private(path, format_properties(dict(props)))
        return []
    text = path.read_text(encoding="utf-8")
    current = read_config(path)
    changes = {key: value for key, value in props.items() if current.get(key) != value}
    if changes:
        write_private(path, update_properties(text, changes))
    return list(changes)


def read_config(path: Path) -> dict[str, str]:
    try:
        return load_properties(path)
    except PropertiesSyntaxError as e:
        raise ConfigError(e.key, "[hidden]", f"{path}:{e.line}: malformed \\uxxxx escape") from None


def existing_credential(paths: Iterable[Path]) -> str | None:
    """The cluster credential in the first of `paths` that exists and has one: a cluster started again keeps
    the secret its hand-started brokers were given."""
    for path in paths:
        if path.is_file():
            credential = read_config(path).get(CREDENTIAL)
            if credential:
                return credential
    return None


def first_listener(path: Path) -> tuple[str, int] | None:
    """(host, port) of the first listener in a broker's server.properties, if it has one that parses."""
    if not path.is_file():
        return None
    listeners = read_config(path).get("listeners")
    if listeners is None:
        return None
    try:
        endpoints = parse_endpoints(listeners)
    except ValueError:
        return None
    return endpoints[0].host, endpoints[0].port


def kafka_listener_port(path: Path) -> int | None:
    """The port of the Kafka-protocol listener (PLAINTEXT or SASL_SSL) in a broker's server.properties that also has the
    gRPC one; None in a file written before brokers had both (its PLAINTEXT listener was the gRPC one)."""
    if not path.is_file():
        return None
    listeners = read_config(path).get("listeners")
    try:
        endpoints = {e.listener_name: e.port for e in parse_endpoints(listeners or "")}
    except ValueError:
        return None
    if GRPC_LISTENER_NAME not in endpoints:
        return None
    # PLAINTEXT, or SASL_SSL in a `cluster up --security` data dir (local_cluster/security.py).
    return endpoints.get("PLAINTEXT", endpoints.get("SASL_SSL"))


def first_log_dir(path: Path) -> str | None:
    """The first of log.dirs (else log.dir) in a broker's server.properties."""
    props = read_config(path)
    dirs = [d.strip() for d in props.get("log.dirs", props.get("log.dir", "")).split(",") if d.strip()]
    return dirs[0] if dirs else None


def write_private(path: Path, text: str) -> None:
    """Write a file only its owner can read (configs and secrets)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)

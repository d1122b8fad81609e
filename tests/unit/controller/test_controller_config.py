"""ControllerConfig: Kafka names and defaults, KafkaConfig's parsing and error style, the CLI's shorthands."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from common.config import ConfigError
from controller.config import ControllerConfig
from controller.main import add_arguments, config_from_args, run
from minibroker.commands import controller as command

REQUIRED = {"zookeeper.connect": "zk:2181", "controller.id": "1001"}


def error(props: dict[str, str]) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        ControllerConfig.from_props(props)
    return caught.value


def test_defaults() -> None:
    c = ControllerConfig.from_props(REQUIRED)
    assert (c.zookeeper_connect, c.controller_id) == ("zk:2181", 1001)
    assert c.zookeeper_session_timeout_ms == 18000
    assert c.controller_socket_timeout_ms == 30000
    assert (c.default_replication_factor, c.num_partitions, c.unclean_leader_election_enable) == (1, 1, False)
    assert c.listeners == "PLAINTEXT://127.0.0.1:0"
    assert c.cluster_credential is None and c.cluster_credential_value is None
    assert (c.authorizer_class_name, c.super_users, c.allow_everyone_if_no_acl_found) == ("", None, False)
    assert c.ssl_principal_mapping_rules == "DEFAULT"


def test_required_keys() -> None:
    assert error({"zookeeper.connect": "zk:2181"}).key == "controller.id"
    assert error({"controller.id": "1"}).key == "zookeeper.connect"
    assert "Missing required configuration" in str(error({"controller.id": "1"}))


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        ("controller.id", "-1", "Value must be at least 0"),
        ("controller.id", "x", "Not a number of type INT"),
        ("zookeeper.session.timeout.ms", "0", "Value must be at least 1"),
        ("unclean.leader.election.enable", "yes", "Expected value to be either true or false"),
        ("listeners", "127.0.0.1:9093", "is not of the form LISTENER_NAME://host:port"),
        # The brokers' authorizer keys, with the brokers' rules.
        ("authorizer.class.name", "com.example.Mine", "Class com.example.Mine cannot be found"),
        ("super.users", "admin", "admin"),
    ],
)
def test_invalid_values(key: str, value: str, reason: str) -> None:
    e = error({**REQUIRED, key: value})
    assert e.key == key
    assert reason in str(e)


def test_unknown_key_suggests_and_hides_the_value() -> None:
    e = error({**REQUIRED, "cluster.credentail": "s3cret"})
    assert "did you mean cluster.credential?" in str(e)
    assert "s3cret" not in str(e)


def test_the_credential_never_prints() -> None:
    c = ControllerConfig.from_props({**REQUIRED, "cluster.credential": " s3cret "})
    assert c.cluster_credential_value == "s3cret"
    assert "s3cret" not in repr(c) and "s3cret" not in str(c)


def test_file_overrides_and_cli_shorthands(tmp_path: Path) -> None:
    path = tmp_path / "controller.properties"
    path.write_text("zookeeper.connect=file:2181\ncontroller.id=1\nnum.partitions=3\n")
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(
        [
            "--config",
            str(path),
            "--override",
            "controller.id=2",
            "--override",
            "num.partitions=4",
            "--zookeeper",
            "cli:2181/x",
        ]
    )
    c = config_from_args(args)
    assert (c.zookeeper_connect, c.controller_id, c.num_partitions) == ("cli:2181/x", 2, 4)
    assert config_from_args(parser.parse_args(["--config", str(path), "--controller-id", "7"])).controller_id == 7


def test_override_without_equals() -> None:
    with pytest.raises(ConfigError) as caught:
        ControllerConfig.from_properties(None, ["controller.id"])
    assert "key=value" in str(caught.value)


def test_the_cli_subcommand() -> None:
    parser = argparse.ArgumentParser(prog="minibroker")
    command.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["controller", "--zookeeper", "zk:2181", "--controller-id", "1001"])
    assert args.func is run
    assert config_from_args(args).controller_id == 1001

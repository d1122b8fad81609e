"""The container entrypoint's environment mapping (minibroker/container.py): pure functions, no process."""

from __future__ import annotations

from pathlib import Path

import pytest

from common.config import ConfigError
from common.properties import format_properties, load_properties, parse_properties
from local_cluster.certificates import CertificateAuthority
from minibroker import container
from minibroker.container import (
    DEFAULT_ZOO_CFG,
    ENSEMBLE_ZOO_CFG,
    health_argv,
    kafka_name,
    kafka_properties,
    main,
    zookeeper_name,
    zookeeper_properties,
)

BROKER_ENV = {
    "KAFKA_BROKER_ID": "2",
    "KAFKA_ZOOKEEPER_CONNECT": "zookeeper:2181",
    "KAFKA_LISTENERS": "INTERNAL://0.0.0.0:29092,EXTERNAL://0.0.0.0:9093",
    "KAFKA_ADVERTISED_LISTENERS": "INTERNAL://broker-2:29092,EXTERNAL://localhost:9093",
    "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
    "KAFKA_INTER_BROKER_LISTENER_NAME": "INTERNAL",
    "KAFKA_GRPC_LISTENER_NAMES": "INTERNAL",
    "PATH": "/usr/bin",
    "HOSTNAME": "broker-2",
}


@pytest.mark.parametrize(
    ("variable", "name"),
    [
        ("KAFKA_MIN_INSYNC_REPLICAS", "min.insync.replicas"),
        ("KAFKA_LOG_DIRS", "log.dirs"),
        ("KAFKA_SOME__NAME", "some_name"),
        ("KAFKA_SOME___NAME", "some-name"),
        ("KAFKA_A___B__C_D", "a-b_c.d"),
    ],
)
def test_kafka_names_as_confluent_maps_them(variable: str, name: str) -> None:
    assert kafka_name(variable) == name


def test_only_kafka_variables_become_broker_properties() -> None:
    props = kafka_properties(BROKER_ENV)
    assert props["inter.broker.listener.name"] == "INTERNAL"
    assert "path" not in props and "hostname" not in props
    assert len(props) == 7
    # What the entrypoint writes reads back unchanged.
    assert parse_properties(format_properties(props)) == props


def test_zookeeper_names_are_camel_case_over_the_defaults() -> None:
    assert zookeeper_name("ZOOKEEPER_TICK_TIME") == "tickTime"
    assert zookeeper_name("ZOOKEEPER_CLIENT_PORT") == "clientPort"
    props = zookeeper_properties({"ZOOKEEPER_TICK_TIME": "500", "KAFKA_BROKER_ID": "1"})
    assert props == {**DEFAULT_ZOO_CFG, "tickTime": "500"}


def test_an_ensemble_member_from_the_official_images_variables() -> None:
    servers = "server.1=zookeeper-1:2888:3888;2181 server.2=zookeeper-2:2888:3888;2181\n server.3=zk-3:2888:3888;2181"
    props = zookeeper_properties({"ZOO_MY_ID": "2", "ZOO_SERVERS": servers, "ZOOKEEPER_SYNC_LIMIT": "3"})
    assert props == {**DEFAULT_ZOO_CFG, **ENSEMBLE_ZOO_CFG, "syncLimit": "3",
                     "server.1": "zookeeper-1:2888:3888;2181", "server.2": "zookeeper-2:2888:3888;2181",
                     "server.3": "zk-3:2888:3888;2181"}
    with pytest.raises(ValueError, match=r"ZOO_SERVERS: 'zookeeper-1:2888:3888' is not server\.<id>="):
        zookeeper_properties({"ZOO_SERVERS": "zookeeper-1:2888:3888"})


def test_a_bad_ensemble_is_said_before_any_server_starts(capsys: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZOO_SERVERS", "nonsense")
    assert main(["zookeeper"]) == 2
    assert "zookeeper: ZOO_SERVERS: 'nonsense' is not server.<id>=" in capsys.readouterr().err


def test_broker_health_checks_the_first_listener_on_loopback_and_the_registration() -> None:
    assert health_argv("broker", BROKER_ENV) == [
        "--bootstrap-server", "127.0.0.1:29092", "--broker-id", "2", "--zookeeper", "zookeeper:2181",
    ]


def test_controller_health_checks_its_listener() -> None:
    env = {"KAFKA_CONTROLLER_ID": "1001", "KAFKA_ZOOKEEPER_CONNECT": "zookeeper:2181",
           "KAFKA_LISTENERS": "PLAINTEXT://controller-1:9090"}
    assert health_argv("controller", env) == ["--controller", "controller-1:9090"]


def test_health_refuses_what_it_cannot_check() -> None:
    with pytest.raises(ValueError, match="no fixed port"):
        health_argv("controller", {"KAFKA_CONTROLLER_ID": "1", "KAFKA_ZOOKEEPER_CONNECT": "zk:2181"})
    with pytest.raises(ConfigError, match=r"did you mean min\.insync\.replicas"):
        health_argv("broker", {**BROKER_ENV, "KAFKA_MIN_INSYNC_REPLICA": "2"})
    with pytest.raises(ValueError, match="broker, controller or zookeeper"):
        health_argv("spark", BROKER_ENV)


def test_a_tls_listener_is_checked_with_the_process_own_certificate(monkeypatch: pytest.MonkeyPatch,
                                                                     tmp_path: Path) -> None:
    monkeypatch.setattr(container, "CONFIG_DIR", tmp_path)
    env = {"KAFKA_CONTROLLER_ID": "1001", "KAFKA_ZOOKEEPER_CONNECT": "zookeeper:2181",
           "KAFKA_LISTENERS": "SSL://controller-1001:9090",
           "KAFKA_SSL_KEYSTORE_LOCATION": "/nonexistent/controller-1001.pem",
           "KAFKA_SSL_TRUSTSTORE_LOCATION": "/nonexistent/ca.pem"}
    with pytest.raises(ConfigError, match=r"ssl\.keystore\.location"):  # its stores are read before it is checked
        health_argv("controller", env)
    ca = CertificateAuthority.create()
    ca.write(tmp_path)
    ca.issue("CN=controller-1001", hosts=["controller-1001"]).write_keystore(tmp_path / "controller-1001.pem")
    env.update(KAFKA_SSL_KEYSTORE_LOCATION=str(tmp_path / "controller-1001.pem"),
               KAFKA_SSL_TRUSTSTORE_LOCATION=str(tmp_path / "ca.pem"))
    argv = health_argv("controller", env)
    assert argv[:2] == ["--controller", "controller-1001:9090"] and argv[2] == "--command-config"
    assert load_properties(Path(argv[3])) == {"security.protocol": "SSL", "ssl.ca.location": str(tmp_path / "ca.pem"),
                                              "ssl.keystore.location": str(tmp_path / "controller-1001.pem")}

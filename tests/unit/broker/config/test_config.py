from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from broker.config.kafka_config import EndPoint, KafkaConfig, unused_configs_warning
from common.config import ConfigError, Password, config_name
from common.properties import parse_properties, update_properties

REQUIRED = {"broker.id": "1", "zookeeper.connect": "127.0.0.1:2181"}


def config(**overrides: str) -> KafkaConfig:
    """A config from the required keys plus `log_retention_ms="5"`-style overrides."""
    return KafkaConfig.from_props({**REQUIRED, **{config_name(k): v for k, v in overrides.items()}})


def error(**overrides: str) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        config(**overrides)
    return caught.value


# Defaults


def test_defaults_are_kafka_2_8s() -> None:
    c = config()
    assert c.broker_id == 1
    assert c.listeners == "PLAINTEXT://127.0.0.1:9092,GRPC://127.0.0.1:9192"
    assert c.grpc_listeners == {"GRPC"}
    assert c.inter_broker_listener == "GRPC"
    assert c.advertised_listeners is None
    assert c.zookeeper_session_timeout_ms == 18000
    assert c.num_partitions == 1
    assert c.default_replication_factor == 1
    assert c.min_insync_replicas == 1
    assert c.unclean_leader_election_enable is False
    assert c.auto_create_topics_enable is True
    assert c.delete_topic_enable is True
    assert c.message_max_bytes == 1048588
    assert c.log_segment_bytes == 1073741824
    assert c.log_retention_hours == 168
    assert c.log_retention_bytes == -1
    assert c.log_index_size_max_bytes == 10485760
    assert c.log_index_interval_bytes == 4096
    assert c.log_flush_interval_messages == 2**63 - 1
    assert c.log_message_timestamp_type == "CreateTime"
    assert c.num_replica_fetchers == 1
    assert c.replica_fetch_max_bytes == 1048576
    assert c.replica_fetch_response_max_bytes == 10485760
    assert c.replica_fetch_wait_max_ms == 500
    assert c.replica_fetch_min_bytes == 1
    assert c.replica_fetch_backoff_ms == 1000
    assert c.replica_lag_time_max_ms == 30000
    assert c.replica_high_watermark_checkpoint_interval_ms == 5000
    assert c.controlled_shutdown_enable is True
    assert c.controlled_shutdown_max_retries == 3
    assert c.controlled_shutdown_retry_backoff_ms == 5000
    assert c.leader_imbalance_check_interval_seconds == 300
    assert c.leader_imbalance_per_broker_percentage == 10
    assert c.offsets_retention_minutes == 10080
    assert c.transactional_id_expiration_ms == 604800000
    assert c.producer_id_expiration_ms == 86400000
    assert c.request_timeout_ms == 30000
    assert c.num_recovery_threads_per_data_dir == 1
    assert c.broker_id_generation_enable is False
    assert c.cluster_credential is None
    assert c.metrics_port == 0


def test_resolved_defaults() -> None:
    c = config()
    assert c.log_dir_paths == (Path("/tmp/kafka-logs"),)
    assert c.log_retention_time_millis == 168 * 3600 * 1000
    assert c.log_roll_time_millis == 168 * 3600 * 1000
    assert c.log_flush_interval_millis == 2**63 - 1
    assert c.zookeeper_connection_timeout_millis == 18000
    assert c.listener_endpoints == (EndPoint("PLAINTEXT", "127.0.0.1", 9092, "PLAINTEXT"),
                                    EndPoint("GRPC", "127.0.0.1", 9192, "PLAINTEXT"))
    assert c.advertised_endpoints == c.listener_endpoints


def test_attribute_names_are_the_kafka_keys() -> None:
    keys = {config_name(f.name) for f in dataclasses.fields(KafkaConfig) if f.name != "listener_overrides"}
    assert {"broker.id", "log.retention.ms", "replica.lag.time.max.ms", "cluster.credential"} <= keys
    assert set(config().values()) == keys


# Overrides and precedence


def test_overrides_win_over_the_file(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("broker.id=1\nzookeeper.connect=zk:2181\nnum.partitions=3\nlog.dirs=/a\n")
    c = KafkaConfig.from_properties(path, ["num.partitions=5", "broker.id = 7"])
    assert (c.num_partitions, c.broker_id, c.zookeeper_connect, c.log_dir_paths) == (5, 7, "zk:2181", (Path("/a"),))


def test_overrides_alone_and_values_containing_equals() -> None:
    c = KafkaConfig.from_properties(None, ["broker.id=2", "zookeeper.connect=zk:2181/chroot=x"])
    assert c.zookeeper_connect == "zk:2181/chroot=x"


def test_override_without_equals() -> None:
    with pytest.raises(ConfigError) as caught:
        KafkaConfig.from_properties(None, ["broker.id"])
    assert caught.value.key == "broker.id"
    assert "key=value" in str(caught.value)


@pytest.mark.parametrize(
    ("keys", "millis"),
    [
        ({"log_retention_hours": "2"}, 2 * 3600 * 1000),
        ({"log_retention_hours": "2", "log_retention_minutes": "3"}, 3 * 60 * 1000),
        ({"log_retention_hours": "2", "log_retention_minutes": "3", "log_retention_ms": "4"}, 4),
        ({"log_retention_ms": "-1"}, -1),
        ({"log_retention_hours": "-5"}, -1),  # any negative value is unlimited
    ],
)
def test_retention_precedence(keys: dict[str, str], millis: int) -> None:
    assert config(**keys).log_retention_time_millis == millis


def test_roll_flush_zookeeper_and_log_dirs_precedence() -> None:
    assert config(log_roll_hours="2").log_roll_time_millis == 2 * 3600 * 1000
    assert config(log_roll_hours="2", log_roll_ms="10").log_roll_time_millis == 10
    assert config(log_flush_scheduler_interval_ms="7").log_flush_interval_millis == 7
    assert config(log_flush_scheduler_interval_ms="7", log_flush_interval_ms="3").log_flush_interval_millis == 3
    assert config(zookeeper_connection_timeout_ms="100").zookeeper_connection_timeout_millis == 100
    assert config(log_dir="/x").log_dir_paths == (Path("/x"),)
    assert config(log_dir="/x", log_dirs=" /a , /b,").log_dir_paths == (Path("/a"), Path("/b"))


def test_values_are_trimmed() -> None:
    c = config(num_partitions="  4 ", auto_create_topics_enable=" FALSE", log_dirs=" /d ")
    assert (c.num_partitions, c.auto_create_topics_enable, c.log_dirs) == (4, False, "/d")


# Errors


def test_unknown_key_names_it_suggests_and_hides_the_value() -> None:
    with pytest.raises(ConfigError) as caught:
        KafkaConfig.from_props({**REQUIRED, "min.insync.replica": "2"})
    e = caught.value
    assert e.key == "min.insync.replica"
    assert e.value == Password("2")
    assert str(e) == (
        "Invalid value [hidden] for configuration min.insync.replica: "
        "not a broker configuration minibroker knows; did you mean min.insync.replicas?"
    )


@pytest.mark.parametrize(
    ("overrides", "key", "reason"),
    [
        ({"num_partitions": "many"}, "num.partitions", "Not a number of type INT"),
        ({"num_partitions": "1_000"}, "num.partitions", "Not a number of type INT"),
        ({"num_partitions": ""}, "num.partitions", "Not a number of type INT"),
        ({"num_partitions": "2147483648"}, "num.partitions", "Not a number of type INT"),
        ({"log_retention_ms": "9223372036854775808"}, "log.retention.ms", "Not a number of type LONG"),
        ({"auto_create_topics_enable": "yes"}, "auto.create.topics.enable", "either true or false"),
        ({"num_partitions": "0"}, "num.partitions", "Value must be at least 1"),
        ({"log_segment_bytes": "60"}, "log.segment.bytes", "Value must be at least 61"),
        ({"min_insync_replicas": "0"}, "min.insync.replicas", "Value must be at least 1"),
        (
            {"leader_imbalance_per_broker_percentage": "101"},
            "leader.imbalance.per.broker.percentage",
            "no more than 100",
        ),
        ({"log_message_timestamp_type": "createtime"}, "log.message.timestamp.type", "CreateTime, LogAppendTime"),
        ({"broker_id": "-1"}, "broker.id", "must be set to a unique id >= 0"),
        ({"broker_id_generation_enable": "true"}, "broker.id.generation.enable", "not supported"),
        ({"log_retention_ms": "0"}, "log.retention.ms", "unlimited (-1) or at least 1"),
        ({"log_roll_ms": "0"}, "log.roll.ms", "at least 1"),
        ({"log_dirs": " , "}, "log.dirs", "at least one log directory"),
        ({"replica_fetch_wait_max_ms": "40000"}, "replica.fetch.wait.max.ms", "replica.socket.timeout.ms"),
        (
            {"replica_fetch_wait_max_ms": "20000", "replica_lag_time_max_ms": "10000"},
            "replica.fetch.wait.max.ms",
            "replica.lag.time.max.ms",
        ),
        ({"listeners": "127.0.0.1:9092"}, "listeners", "LISTENER_NAME://host:port"),
        ({"listeners": "SSL://:9093,GRPC://:9192"}, "ssl.keystore.type", "only PEM"),
        ({"listeners": "SSL://:9093,GRPC://:9192", "ssl.keystore.type": "PEM", "ssl.truststore.type": "PEM"},
         "ssl.keystore.location", "needs a key store"),
        ({"listeners": "SASL_SSL://:9093,GRPC://:9192"}, "sasl.enabled.mechanisms", "PLAIN, SCRAM-SHA-256"),
        ({"listeners": "CLIENT://:9093,GRPC://:9192", "listener.security.protocol.map":
          "CLIENT:SASL_PLAINTEXT,GRPC:PLAINTEXT", "sasl.enabled.mechanisms": "PLAIN",
          "listener.name.client.sasl.enabled.mechanisms": "GSSAPI"},
         "listener.name.client.sasl.enabled.mechanisms", "SCRAM-SHA-512"),
        ({"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,GRPC:SASL_SSL"}, "listener.security.protocol.map",
         "gRPC listener GRPC must be PLAINTEXT or SSL"),
        ({"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,GRPC:SSL"}, "ssl.keystore.type",
         "only PEM stores are read here"),
        ({"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,GRPC:SSL", "ssl.client.auth": "requested"},
         "ssl.client.auth", "gRPC cannot ask for a client certificate without requiring it"),
        ({"listener.name.plaintext.log.dirs": "/x"}, "listener.name.plaintext.log.dirs", "not a key a listener"),
        ({"listener.name.client.ssl.client.auth": "maybe"}, "listener.name.client.ssl.client.auth", "one of"),
        ({"listeners": "PLAINTEXT://:70000"}, "listeners", "0..65535"),
        ({"listeners": "PLAINTEXT://a:1,PLAINTEXT://b:2"}, "listeners", "different name"),
        ({"listeners": ""}, "listeners", "at least one listener"),
        ({"listeners": "PLAINTEXT://0.0.0.0:9092"}, "advertised.listeners", "0.0.0.0"),
        ({"listeners": "INTERNAL://:29092"}, "listeners", "No security protocol defined for listener INTERNAL"),
        ({"listeners": "PLAINTEXT://a:1,EXTERNAL://b:1", "listener_security_protocol_map": "PLAINTEXT:PLAINTEXT,"
          "EXTERNAL:PLAINTEXT"}, "listeners", "different port"),
        ({"listener_security_protocol_map": "PLAINTEXT:TLS"}, "listener.security.protocol.map",
         "Invalid security protocol `TLS`"),
        ({"listener_security_protocol_map": "PLAINTEXT"}, "listener.security.protocol.map", "LISTENER_NAME:"),
        ({"listeners": "PLAINTEXT://a:1", "advertised_listeners": "EXTERNAL://b:1",
          "listener_security_protocol_map": "PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT"}, "advertised.listeners",
         "must be equal to or a subset of the ones defined in listeners. Found EXTERNAL"),
        ({"listeners": "INTERNAL://a:1", "listener_security_protocol_map": "INTERNAL:PLAINTEXT"},
         "inter.broker.listener.name", "must be a listener name defined in advertised.listeners. The valid options"
         " based on currently configured listeners are INTERNAL"),
        # Kafka's own server.properties with its listeners line uncommented: the reason says what to add.
        ({"listeners": "PLAINTEXT://:9092"}, "inter.broker.listener.name",
         "are PLAINTEXT (no gRPC listener: replication and the controller talk gRPC, so a broker needs a listener"
         " named in grpc.listener.names (GRPC) next to its Kafka listeners, e.g. listeners=PLAINTEXT://:9092,"
         "GRPC://:9192)"),
        ({"metrics_port": "65536"}, "metrics.port", "no more than 65535"),
        # Replication and the controller speak gRPC: a Kafka-protocol listener cannot carry them.
        ({"listeners": "PLAINTEXT://a:1,GRPC://a:2", "inter_broker_listener_name": "PLAINTEXT"},
         "inter.broker.listener.name", "must name a gRPC listener (grpc.listener.names: GRPC)"),
        ({"socket_request_max_bytes": "0"}, "socket.request.max.bytes", "at least 1"),
    ],
)
def test_invalid_values(overrides: dict[str, str], key: str, reason: str) -> None:
    e = error(**overrides)
    assert e.key == key
    assert reason in e.reason
    assert str(e).startswith("Invalid value ") and f"for configuration {key}: " in str(e)


def test_missing_zookeeper_connect() -> None:
    with pytest.raises(ConfigError) as caught:
        KafkaConfig.from_props({"broker.id": "1"})
    assert str(caught.value) == (
        "Invalid value null for configuration zookeeper.connect: "
        "Missing required configuration which has no default value"
    )


def test_advertised_listeners() -> None:
    c = config(listeners="plaintext://0.0.0.0:0,grpc://0.0.0.0:0",
               advertised_listeners="PLAINTEXT://[::1]:9092,GRPC://[::1]:9192")
    assert c.listener_endpoints == (EndPoint("PLAINTEXT", "0.0.0.0", 0, "PLAINTEXT"),
                                    EndPoint("GRPC", "0.0.0.0", 0, "PLAINTEXT"))
    assert c.advertised_endpoints == (EndPoint("PLAINTEXT", "::1", 9092, "PLAINTEXT"),
                                      EndPoint("GRPC", "::1", 9192, "PLAINTEXT"))
    assert config(listeners="PLAINTEXT://:9092,GRPC://:9192").listener_endpoints[0].host == ""


def test_two_listeners_named_through_the_security_protocol_map() -> None:
    c = config(
        listeners="internal://0.0.0.0:29092,EXTERNAL://0.0.0.0:9092",
        advertised_listeners="INTERNAL://broker-1:29092,EXTERNAL://localhost:9092",
        listener_security_protocol_map="INTERNAL:PLAINTEXT,external:plaintext",
        inter_broker_listener_name="internal",
        grpc_listener_names="internal",
    )
    assert c.listener_endpoints == (EndPoint("INTERNAL", "0.0.0.0", 29092), EndPoint("EXTERNAL", "0.0.0.0", 9092))
    assert [e.connection_string for e in c.advertised_endpoints] == [
        "INTERNAL://broker-1:29092",
        "EXTERNAL://localhost:9092",
    ]
    assert c.inter_broker_listener == "INTERNAL"
    # Any number of listeners may take a free port.
    assert len(config(listeners="PLAINTEXT://:0,SSL://:0,GRPC://:0", listener_security_protocol_map="PLAINTEXT:"
                      "PLAINTEXT,SSL:PLAINTEXT,GRPC:PLAINTEXT").listener_endpoints) == 3


def test_secrets_never_print() -> None:
    c = config(cluster_credential="s3cret")
    assert c.cluster_credential == Password("s3cret")
    assert c.cluster_credential is not None and c.cluster_credential.value == "s3cret"
    assert "s3cret" not in repr(c) + str(c) + c.dump()


def test_listener_overrides_win_for_their_listener_only() -> None:
    c = KafkaConfig.from_props({
        **REQUIRED,
        "listeners": "SASL_SSL://:9093,SSL://:9094,GRPC://:9192",
        "ssl.keystore.type": "PEM", "ssl.truststore.type": "PEM", "ssl.keystore.location": "/k.pem",
        "listener.name.ssl.ssl.keystore.location": "/ssl.pem",
        "listener.name.ssl.ssl.client.auth": "required",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": 'PlainLoginModule required user_a="b";',
    })
    assert c.for_listener("SSL", "ssl.keystore.location") == "/ssl.pem"
    assert c.for_listener("SASL_SSL", "ssl.keystore.location") == "/k.pem"
    assert (c.for_listener("SSL", "ssl.client.auth"), c.for_listener("SASL_SSL", "ssl.client.auth")) == (
        "required", "none")
    assert c.listener_key("SSL", "ssl.client.auth") == "listener.name.ssl.ssl.client.auth"
    assert c.listener_key("SASL_SSL", "ssl.client.auth") == "ssl.client.auth"
    jaas = c.for_listener("SASL_SSL", "plain.sasl.jaas.config")
    assert jaas.value == 'PlainLoginModule required user_a="b";'
    assert c.for_listener("SSL", "plain.sasl.jaas.config") is None
    assert "user_a" not in c.dump() and "listener.name.sasl_ssl.plain.sasl.jaas.config = [hidden]" in c.dump()


# Output


def test_dump_is_kafkas_logall_format() -> None:
    dump = config(cluster_credential="s3cret", broker_rack="r1").dump()
    lines = dump.split("\n")
    assert lines[0] == "KafkaConfig values: "
    assert dump.endswith("\n") and lines[-1] == ""
    entries = lines[1:-1]
    assert all(line.startswith("\t") and " = " in line for line in entries)
    assert entries == sorted(entries)
    assert len(entries) == len(dataclasses.fields(KafkaConfig)) - 1  # listener_overrides: none here
    for line in (
        "\tadvertised.listeners = null",
        "\tauto.create.topics.enable = true",
        "\tbroker.id = 1",
        "\tbroker.rack = r1",
        "\tcluster.credential = [hidden]",
        # Which listener speaks what, in the dump: PLAINTEXT is Kafka's protocol, GRPC minibroker's.
        "\tlisteners = PLAINTEXT://127.0.0.1:9092,GRPC://127.0.0.1:9192",
        "\tgrpc.listener.names = GRPC",
        "\tinter.broker.listener.name = null",
        "\tsocket.request.max.bytes = 104857600",
        "\tmax.connections.per.ip = 2147483647",
        "\tconnections.max.idle.ms = 600000",
        "\tunclean.leader.election.enable = false",
    ):
        assert line in entries


def test_log_properties_are_resolved_broker_names() -> None:
    props = config(
        log_retention_minutes="3", log_roll_hours="1", unclean_leader_election_enable="true"
    ).log_properties()
    assert props["log.retention.ms"] == "180000"
    assert props["log.roll.ms"] == "3600000"
    assert props["log.flush.interval.ms"] == str(2**63 - 1)
    assert props["log.segment.bytes"] == "1073741824"
    assert props["message.max.bytes"] == "1048588"
    assert props["unclean.leader.election.enable"] == "true"
    assert all(isinstance(v, str) for v in props.values())
    assert "log.retention.minutes" not in props and "log.roll.hours" not in props


# Properties files


def test_properties_syntax() -> None:
    text = (
        "# comment\n"
        "   ! another comment\n"
        "\n"
        "a=1\n"
        "b : 2\n"
        "c 3\n"
        "  d\t=\f4  \n"  # leading whitespace skipped, trailing kept (the config trims it)
        "e==5\n"  # the value starts at the second '='
        "f\n"  # a key alone has an empty value
        "g=x=y:z\n"
        "h\\=i\\:j = k\n"  # escaped separators belong to the key
        "l = \\u0041\\t\\\\\\q\n"
        "a=last wins\n"
    )
    assert parse_properties(text) == {
        "a": "last wins",
        "b": "2",
        "c": "3",
        "d": "4  ",
        "e": "=5",
        "f": "",
        "g": "x=y:z",
        "h=i:j": "k",
        "l": "A\t\\q",
    }


def test_properties_line_continuations() -> None:
    text = (
        "listeners = PLAINTEXT://a:1,\\\n"
        "            PLAINTEXT://b:2\n"
        "# a comment line ending in a backslash does not continue \\\n"
        "even = x\\\\\n"  # an even number of backslashes is literal
        "next = y\n"
        "dangling = z\\\n"
        "\n"  # an empty line ends the logical line
        "after = w\n"
        "crlf = 1\\\r\n"
        "  2\r\n"
        "eof = v\\"
    )
    assert parse_properties(text) == {
        "listeners": "PLAINTEXT://a:1,PLAINTEXT://b:2",
        "even": "x\\",
        "next": "y",
        "dangling": "z",
        "after": "w",
        "crlf": "12",
        "eof": "v",
    }


def test_malformed_unicode_escape_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("broker.id=1\nzookeeper.connect=\\u12G4\n")
    with pytest.raises(ConfigError) as caught:
        KafkaConfig.from_properties(path)
    assert caught.value.key == "zookeeper.connect"
    assert f"{path}:2" in caught.value.reason


def test_a_malformed_secret_is_not_printed(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("cluster.credential=s3cret\\u00\n")
    with pytest.raises(ConfigError) as caught:
        KafkaConfig.from_properties(path)
    assert "s3cret" not in str(caught.value)


def test_a_kafka_server_properties_file(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text(
        "############################# Server Basics #############################\n"
        "# The id of the broker. This must be set to a unique integer for each broker.\n"
        "broker.id=0\n"
        # Kafka's file plus the gRPC listener brokers and controllers talk to each other on.
        "listeners=PLAINTEXT://:9092,GRPC://:9192\n"
        "log.dirs=/tmp/kafka-logs\n"
        "num.partitions=1\n"
        "num.recovery.threads.per.data.dir=1\n"
        "log.retention.hours=168\n"
        "log.segment.bytes=1073741824\n"
        "log.retention.check.interval.ms=300000\n"
        "zookeeper.connect=localhost:2181\n"
        "zookeeper.connection.timeout.ms=18000\n"
    )
    c = KafkaConfig.from_properties(path)
    assert (c.broker_id, c.zookeeper_connect, c.listener_endpoints[0].port) == (0, "localhost:2181", 9092)


def test_update_properties_changes_only_the_given_keys() -> None:
    text = ("# The id of the broker.\n"
            "broker.id=0\n"
            "\n"
            "log.dirs=/tmp/a,\\\n"
            "    /tmp/b\n"
            "num.network.threads  3\n"
            "zookeeper.connect=old:2181\n")
    updated = update_properties(text, {"log.dirs": "/data", "zookeeper.connect": "new:2181", "metrics.port": "9404"})
    assert updated == ("# The id of the broker.\n"
                       "broker.id=0\n"
                       "\n"
                       "log.dirs=/data\n"
                       "num.network.threads  3\n"
                       "zookeeper.connect=new:2181\n"
                       "metrics.port=9404\n")
    assert parse_properties(updated) == {"broker.id": "0", "log.dirs": "/data", "num.network.threads": "3",
                                         "zookeeper.connect": "new:2181", "metrics.port": "9404"}
    assert update_properties(text, {}) == text


def test_unknown_keys_of_a_server_properties_are_listed_not_fatal(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("broker.id=0\nzookeeper.connect=localhost:2181\nnum.network.threads=3\n"
                    "min.insync.replica=2\nsocket.send.buffer.bytes=102400\n")
    unused: list[str] = []
    config = KafkaConfig.from_properties(path, ["queued.max.requests=500"], unused)
    assert config.broker_id == 0
    assert unused == ["num.network.threads", "min.insync.replica", "socket.send.buffer.bytes", "queued.max.requests"]
    assert unused_configs_warning(unused) == (
        "These configurations '[num.network.threads, min.insync.replica, socket.send.buffer.bytes,"
        " queued.max.requests]' were supplied but are not used yet."
        " (min.insync.replica: did you mean min.insync.replicas?)")
    with pytest.raises(ConfigError, match=r"num\.network\.threads"):
        KafkaConfig.from_properties(path)

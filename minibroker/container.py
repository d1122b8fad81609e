"""The container image's entrypoint (Dockerfile): environment variables -> a config file -> exec the process.

    python -m minibroker.container broker       KAFKA_* -> server.properties, exec `minibroker broker`
    python -m minibroker.container controller   KAFKA_* -> controller.properties, exec `minibroker controller`
    python -m minibroker.container zookeeper    ZOOKEEPER_* over DEFAULT_ZOO_CFG -> zoo.cfg, exec the server's JVM;
                                                with ZOO_MY_ID and ZOO_SERVERS (the official image's variables)
                                                one member of an ensemble
    python -m minibroker.container health broker|controller|zookeeper
                                                the healthcheck of the process these variables configure (over
                                                TLS with the process's own certificate on an SSL listener)
    python -m minibroker.container security-init
                                                docker-compose.secure.yml's one-shot: the CA, certificates, JAAS
                                                file and admin properties in MINIBROKER_SECURITY_DIR (certificates
                                                naming MINIBROKER_SECURITY_HOSTS), ZooKeeper secured at
                                                KAFKA_ZOOKEEPER_CONNECT, the admin's SCRAM credentials written
    python -m minibroker.container CMD ARGS...  anything else runs as given (`minibroker topics ...`, `bash`)

Kafka config names come from variables as Confluent's images map them: drop
KAFKA_, lower-case, then `___` -> `-`, `__` -> `_`, `_` -> `.`
(KAFKA_MIN_INSYNC_REPLICAS -> min.insync.replicas). ZooKeeper's are camelCase:
ZOOKEEPER_TICK_TIME -> tickTime. An ensemble member is configured as the official
`zookeeper` image's: ZOO_MY_ID=2 (its myid file), ZOO_SERVERS="server.1=zookeeper-1:2888:3888;2181
server.2=..." (every member, whitespace-separated). The files go to CONFIG_DIR; the processes
exec'd replace this one, so signals (docker stop, docker kill) reach them.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from broker.config.kafka_config import KafkaConfig
from common.config import parse_endpoints
from common.properties import format_properties
from controller.config import ControllerConfig
from local_cluster import security as cluster_security
from minibroker.commands import health
from zk.acl import ZkSecurity
from zk.client import KafkaZkClient
from zk.server import QUORUM_MAIN_CLASS, SERVING_MODES, ZOOKEEPER_MAIN_CLASS, server_command, server_mode

CONFIG_DIR = Path("/etc/minibroker")
KAFKA_PREFIX = "KAFKA_"
ZOOKEEPER_PREFIX = "ZOOKEEPER_"
# A standalone server for a handful of brokers, as zk/server.py's LocalZooKeeper runs one.
DEFAULT_ZOO_CFG = {
    "tickTime": "2000",
    # Not Debian's /var/lib/zookeeper: its myid file there is a placeholder a standalone server refuses.
    "dataDir": "/var/lib/minibroker/zookeeper",
    "clientPort": "2181",
    "maxClientCnxns": "0",
    "maxSessionTimeout": "60000",
    "admin.enableServer": "false",
    "4lw.commands.whitelist": "ruok,srvr,stat",
}
# An ensemble member's additions: ticks to sync with a new leader and to stay in step with it (a member silent
# for syncLimit ticks, 4 s, is dropped and a leader elected again); each member listens for its peers on every
# address (its service name resolves to the container's address on the compose network only).
ENSEMBLE_ZOO_CFG = {"initLimit": "10", "syncLimit": "2", "quorumListenOnAllIPs": "true"}
MY_ID_VARIABLE = "ZOO_MY_ID"
SERVERS_VARIABLE = "ZOO_SERVERS"
_UNDERSCORES = {"_": ".", "__": "_", "___": "-"}


def kafka_name(variable: str) -> str:
    """KAFKA_LOG_DIRS -> log.dirs, KAFKA_SOME__NAME -> some_name, KAFKA_SOME___NAME -> some-name."""
    return re.sub("_{1,3}", lambda m: _UNDERSCORES[m.group()], variable.removeprefix(KAFKA_PREFIX).lower())


def zookeeper_name(variable: str) -> str:
    """ZOOKEEPER_TICK_TIME -> tickTime."""
    first, *rest = variable.removeprefix(ZOOKEEPER_PREFIX).lower().split("_")
    return first + "".join(word.capitalize() for word in rest)


def kafka_properties(env: Mapping[str, str]) -> dict[str, str]:
    return {kafka_name(k): v for k, v in sorted(env.items()) if k.startswith(KAFKA_PREFIX)}


def zookeeper_properties(env: Mapping[str, str]) -> dict[str, str]:
    overrides = {zookeeper_name(k): v for k, v in sorted(env.items()) if k.startswith(ZOOKEEPER_PREFIX)}
    servers = {}
    for entry in env.get(SERVERS_VARIABLE, "").split():
        key, sep, value = entry.partition("=")
        if not sep or not key.startswith("server."):
            raise ValueError(f"{SERVERS_VARIABLE}: {entry!r} is not server.<id>=<host>:<quorum port>:<election port>"
                             "[;<client port>]")
        servers[key] = value
    return {**DEFAULT_ZOO_CFG, **(ENSEMBLE_ZOO_CFG if servers else {}), **servers, **overrides}


def health_argv(role: str, env: Mapping[str, str]) -> list[str]:
    """`minibroker health` arguments for the process `env` configures; ValueError if it cannot be checked."""
    if role == "broker":
        config = KafkaConfig.from_props(kafka_properties(env))
        # The health service is gRPC's: the first listener that speaks it.
        listener = next(e for e in config.listener_endpoints if config.speaks_grpc(e.listener_name))
        if not listener.port:
            raise ValueError("the broker's first gRPC listener has no fixed port to check")
        tls = [] if listener.security_protocol == "PLAINTEXT" else _tls_client_config(
            config.for_listener(listener.listener_name, "ssl.truststore.location"),
            config.for_listener(listener.listener_name, "ssl.keystore.location"))
        return ["--bootstrap-server", _local_address(listener.host, listener.port),
                "--broker-id", str(config.broker_id), "--zookeeper", config.zookeeper_connect, *tls]
    if role == "controller":
        controller = ControllerConfig.from_props(kafka_properties(env))
        listener = parse_endpoints(controller.listeners)[0]
        if not listener.port:
            raise ValueError("the controller's listener has no fixed port to check")
        tls = [] if listener.security_protocol == "PLAINTEXT" else _tls_client_config(
            controller.ssl_truststore_location, controller.ssl_keystore_location)
        return ["--controller", _local_address(listener.host, listener.port), *tls]
    raise ValueError(f"no health check for {role!r}: broker, controller or zookeeper")


def _tls_client_config(truststore: str | None, keystore: str | None) -> list[str]:
    """A TLS listener is checked as its own process reaches its peers: with its certificate (mutual TLS)."""
    path = _write("health-client.properties", {"security.protocol": "SSL", "ssl.ca.location": truststore or "",
                                                "ssl.keystore.location": keystore or ""})
    return ["--command-config", str(path)]


def security_init(env: Mapping[str, str]) -> int:
    """Make (or keep) the secure compose cluster's files, then secure its ZooKeeper (retried until it answers:
    the one-shot may start first)."""
    directory = Path(env.get("MINIBROKER_SECURITY_DIR", "/var/lib/minibroker/security"))
    hosts = [h for h in env.get("MINIBROKER_SECURITY_HOSTS", "localhost,127.0.0.1").split(",") if h]
    ids = [int(i) for i in env.get("MINIBROKER_BROKER_IDS", "1,2,3").split(",")]
    controllers = [int(i) for i in env.get("MINIBROKER_CONTROLLER_IDS", "1001,1002").split(",")]
    secure = cluster_security.prepare(directory, ids, controllers, hosts, directory=directory)
    connect = env["KAFKA_ZOOKEEPER_CONNECT"]
    with KafkaZkClient.connect(connect, timeout=60, security=ZkSecurity(True, secure.zookeeper)) as zk:
        count = cluster_security.secure_zookeeper(zk, secure)
    print(f"security-init: {directory} ready (certificates for {', '.join(hosts)}); {count} znodes secured at"
          f" {connect}; admin properties {secure.client_config}")
    return 0


def _local_address(host: str, port: int) -> str:
    # A wildcard bind is reached on loopback; a named host (the container's own name) as named.
    reachable = "127.0.0.1" if host in ("", "0.0.0.0") else host
    return f"[{reachable}]:{port}" if ":" in reachable else f"{reachable}:{port}"


def _zookeeper_healthy(env: Mapping[str, str]) -> bool:
    port = int(zookeeper_properties(env)["clientPort"])
    # Not `ruok`: that answers before the server serves requests (an ensemble member: before it has a quorum).
    return server_mode("127.0.0.1", port, timeout=5) in SERVING_MODES


def _write(name: str, props: dict[str, str]) -> Path:
    CONFIG_DIR.mkdir(parents=True, exist_ok=True)
    path = CONFIG_DIR / name
    path.write_text(format_properties(props))
    return path


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    env = os.environ
    if not args or args[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    command, rest = args[0], args[1:]
    if command == "broker":
        config = _write("server.properties", kafka_properties(env))
        os.execvp("minibroker", ["minibroker", "broker", "--config", str(config), *rest])
    if command == "controller":
        config = _write("controller.properties", kafka_properties(env))
        os.execvp("minibroker", ["minibroker", "controller", "--config", str(config), *rest])
    if command == "zookeeper":
        try:
            props = zookeeper_properties(env)
        except ValueError as e:
            print(f"zookeeper: {e}", file=sys.stderr)
            return 2
        Path(props["dataDir"]).mkdir(parents=True, exist_ok=True)
        main_class = ZOOKEEPER_MAIN_CLASS
        if env.get(MY_ID_VARIABLE):
            (Path(props["dataDir"]) / "myid").write_text(f"{env[MY_ID_VARIABLE]}\n")
            main_class = QUORUM_MAIN_CLASS
        config = _write("zoo.cfg", props)
        command_line = server_command(config, main_class)
        os.execvp(command_line[0], command_line)
    if command == "security-init":
        return security_init(env)
    if command == "health":
        role = rest[0] if rest else ""
        if role == "zookeeper":
            return 0 if _zookeeper_healthy(env) else 1
        try:
            check = health_argv(role, env)
        except ValueError as e:  # ConfigError is one
            print(f"health: {e}", file=sys.stderr)
            return 2
        parser = argparse.ArgumentParser(prog="minibroker")
        health.register(parser.add_subparsers())
        return health.run(parser.parse_args(["health", *check]))
    os.execvp(command, args)


if __name__ == "__main__":
    sys.exit(main())

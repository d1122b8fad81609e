"""What `cluster up` decides from a data dir before it starts anything: its ports and its config files."""

from __future__ import annotations

import socket
import stat
from pathlib import Path

from local_cluster import configs, ports
from local_cluster.cluster_file import BrokerEntry, ClusterInfo, ZooKeeperEntry, ZooKeeperMember
from zk.server import port_in_use


def _previous(tmp_path: Path) -> ClusterInfo:
    return ClusterInfo(ZooKeeperEntry("127.0.0.1:2000", pid=42),
                       brokers=[BrokerEntry(1, "127.0.0.1", 2001, None, str(tmp_path / "b1"), kafka_port=2101),
                                BrokerEntry(2, "127.0.0.1", 2002, None, str(tmp_path / "b2"))])


def test_port_base_layout() -> None:
    plan = ports.plan_ports(None, [1, 2, 3], 9000, lambda i: Path("/nonexistent"), configs.first_listener,
                            "127.0.0.1")
    assert (plan.zookeeper, plan.brokers, plan.chosen) == (9000, {1: 9001, 2: 9002, 3: 9003}, "--port-base 9000")
    assert plan.kafka == {1: 9101, 2: 9102, 3: 9103}, "the Kafka listeners, 100 above"
    assert ports.port_base_problem(65433, 3) == (
        "--port-base 65433 leaves no room for 3 brokers: ports 65433..65536 must be at most 65535")
    assert ports.port_base_problem(65432, 3) is None
    assert ports.port_base_problem(0, 3) == "--port-base must be a port number, not 0"


def test_ports_as_before_an_edited_listener_wins_and_new_brokers_get_free_ones(tmp_path: Path) -> None:
    edited = tmp_path / "broker-2" / "server.properties"
    edited.parent.mkdir()
    edited.write_text("listeners=GRPC://127.0.0.1:3002,PLAINTEXT://127.0.0.1:3102\n")
    plan = ports.plan_ports(_previous(tmp_path), [1, 2, 3], None,
                            lambda i: tmp_path / f"broker-{i}" / "server.properties", configs.first_listener,
                            "127.0.0.1", configs.kafka_listener_port)
    assert plan.zookeeper == 2000 and plan.chosen == "as before"
    assert plan.brokers[1] == 2001 and plan.brokers[2] == 3002
    assert plan.brokers[3] not in (0, 2000, 2001, 3002)
    assert plan.kafka[1] == 2101 and plan.kafka[2] == 3102, "cluster.json's, then the edited file's"
    assert plan.kafka[3] not in (0, 2000, 2001, 2101, 3002, 3102)
    # A file from before brokers had a Kafka listener: its PLAINTEXT listener was the gRPC one.
    edited.write_text("listeners=PLAINTEXT://127.0.0.1:3002\n")
    assert configs.kafka_listener_port(edited) is None


def _ensemble() -> ClusterInfo:
    members = [ZooKeeperMember(i, "127.0.0.1", 2180 + i, 2880 + i, 3880 + i, 100 + i) for i in (1, 2, 3)]
    return ClusterInfo(ZooKeeperEntry(",".join(m.connect for m in members), pid=None, members=members))


def test_an_ensemble_in_cluster_json_and_its_ports(tmp_path: Path) -> None:
    info = _ensemble()
    info.save(tmp_path)
    loaded = ClusterInfo.load(tmp_path)
    assert loaded == info and not loaded.zookeeper.external
    assert loaded.zookeeper.members[1].quorum_member().server_line() == "server.2=127.0.0.1:2882:3882;127.0.0.1:2182"
    assert ClusterInfo(ZooKeeperEntry("zk:2181", pid=None)).zookeeper.external
    # A cluster.json from before ensembles (no "members") still loads.
    (tmp_path / "cluster.json").write_text('{"zookeeper": {"connect": "127.0.0.1:2000", "pid": 7},'
                                           ' "controllers": [], "brokers": []}')
    assert ClusterInfo.load(tmp_path).zookeeper == ZooKeeperEntry("127.0.0.1:2000", 7)
    # As before: each member's client port again; --port-base: N+200+<i>.
    again = ports.plan_ports(info, [1], None, lambda i: Path("/nonexistent"), configs.first_listener, "127.0.0.1",
                             zookeeper_nodes=3)
    assert (again.zookeeper, again.zookeeper_members, again.chosen) == (0, {1: 2181, 2: 2182, 3: 2183}, "as before")
    based = ports.plan_ports(None, [1], 9000, lambda i: Path("/nonexistent"), configs.first_listener, "127.0.0.1",
                             zookeeper_nodes=3)
    assert (based.zookeeper, based.zookeeper_members) == (0, {1: 9201, 2: 9202, 3: 9203})
    assert ports.port_base_problem(65400, 3, zookeeper_nodes=3) == ("--port-base 65400 leaves no room for 3 brokers"
                                                                    " and 3 ZooKeeper servers: ports 65400..65603"
                                                                    " must be at most 65535")
    assert ports.port_base_problem(65300, 3, zookeeper_nodes=3) is None


def test_write_config_keeps_the_users_file(tmp_path: Path) -> None:
    path = tmp_path / "broker-1" / "server.properties"
    assert configs.write_config(path, {"broker.id": "1", "cluster.credential": "s3cret"}) == []
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    path.write_text(path.read_text() + "# mine\nnum.network.threads=3\n")
    edited = path.read_text()
    assert configs.write_config(path, {"broker.id": "1", "cluster.credential": "s3cret"}) == []
    assert path.read_text() == edited
    assert configs.write_config(path, {"broker.id": "1", "zookeeper.connect": "h:1"}) == ["zookeeper.connect"]
    assert path.read_text() == edited + "zookeeper.connect=h:1\n"
    assert configs.existing_credential([tmp_path / "missing.properties", path]) == "s3cret"
    assert configs.first_log_dir(path) is None


def test_well_known_ports_where_free_and_a_free_port_named_for_each_taken_one() -> None:
    def plan() -> ports.PortPlan:
        return ports.plan_ports(None, [1, 2, 3], None, lambda i: Path("/nonexistent"), configs.first_listener,
                                "127.0.0.1", configs.kafka_listener_port, well_known=True)

    free = [port for port in (2181, 9092, 9093, 9094, 9192, 9193, 9194) if not port_in_use("127.0.0.1", port)]
    with socket.socket() as holder:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # One well-known port held by someone else: a free one is taken instead, and named.
        held = free[0] if free else None
        if held is not None:
            holder.bind(("127.0.0.1", held))
            holder.listen()
        planned = plan()
    wanted = {"zookeeper": (planned.zookeeper, 2181)}
    wanted |= {f"broker-{i}": (planned.brokers[i], 9191 + i) for i in (1, 2, 3)}
    wanted |= {f"broker-{i} Kafka listener": (planned.kafka[i], 9091 + i) for i in (1, 2, 3)}
    assert planned.chosen == "Kafka's well-known ports"
    for name, (port, well_known) in wanted.items():
        if well_known in free and well_known != held:
            assert port == well_known, name
        else:
            assert port != well_known and f"{name} {well_known}: {port}" in planned.moved, name
    assert len(planned.moved) == len(wanted) - len(free) + (held is not None)
    # A data dir that ran before keeps its ports, whatever is free now.
    assert ports.plan_ports(ClusterInfo(ZooKeeperEntry("127.0.0.1:2000", pid=42), brokers=[
        BrokerEntry(1, "127.0.0.1", 2001, None, "/nonexistent", kafka_port=2101)]), [1], None,
        lambda i: Path("/nonexistent"), configs.first_listener, "127.0.0.1", configs.kafka_listener_port,
        well_known=True) == ports.PortPlan(2000, {1: 2001}, "as before", {1: 2101})

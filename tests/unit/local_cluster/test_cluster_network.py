"""The pure parts of `cluster up --netns` and its partitions: names, addresses, subnets, capabilities, rules."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest

from local_cluster.cluster_file import ClusterInfo, ZooKeeperEntry
from local_cluster.network import (
    NetworkError,
    ip_failure,
    missing_capabilities,
    network_tag,
    partition_ruleset,
    plan_network,
    reconnect_ruleset,
)

Net = ipaddress.IPv4Network


def test_plan_names_every_host_after_the_data_dir() -> None:
    network = plan_network("abc123", [1, 2], routed=[])
    subnet = Net(network.subnet)
    assert subnet.prefixlen == 24 and subnet.subnet_of(Net("10.200.0.0/13"))
    assert network.bridge == "mbabc123"
    assert network.gateway == str(subnet[1])
    assert network.namespaces == {"core": "minibroker-abc123-core", "broker-1": "minibroker-abc123-broker-1",
                                  "broker-2": "minibroker-abc123-broker-2"}
    assert network.addresses == {"core": str(subnet[2]), "broker-1": str(subnet[11]), "broker-2": str(subnet[12])}
    assert network.veths == {"core": "mbabc123-c", "broker-1": "mbabc123-b1", "broker-2": "mbabc123-b2"}
    # The same data dir gets the same plan; another one, other names.
    assert plan_network("abc123", [1, 2], routed=[]) == network
    assert network_tag(Path("/data/a")) != network_tag(Path("/data/b"))
    assert network_tag(Path("/data/a")) == network_tag(Path("/data/x/../a"))


def test_plan_steps_past_subnets_already_routed_and_wraps_around() -> None:
    first = Net(plan_network("000000", [1], routed=[]).subnet)
    assert first == Net("10.200.0.0/24")
    assert Net(plan_network("000000", [1], routed=[first, Net("10.200.1.0/24")]).subnet) == Net("10.200.2.0/24")
    # A wider route covers many /24s.
    assert Net(plan_network("000000", [1], routed=[Net("10.200.0.0/16")]).subnet) == Net("10.201.0.0/24")
    last = int("0007ff", 16)  # the pool's last /24 (2048 of them), then back to its first
    assert Net(plan_network(f"{last:06x}", [1], routed=[Net("10.207.255.0/24")]).subnet) == first
    with pytest.raises(NetworkError, match=r"every /24 of 10\.200\.0\.0/13 is already routed on this machine"):
        plan_network("000000", [1], routed=[Net("10.0.0.0/8")])


def test_plan_refuses_broker_ids_without_an_address() -> None:
    assert plan_network("abc123", [244], routed=[]).addresses["broker-244"].endswith(".254")
    with pytest.raises(NetworkError, match=r"broker id 245 has no address on the /24 of --netns \(ids 0\.\.244\)"):
        plan_network("abc123", [245], routed=[])


def test_missing_capabilities_from_proc_status() -> None:
    root = "Name:\tpython\nCapInh:\t0000000000000000\nCapEff:\t000001ffffffffff\n"
    assert missing_capabilities(root) == []
    no_net_admin = "CapEff:\t000001ffffffefff\n"
    assert missing_capabilities(no_net_admin) == ["CAP_NET_ADMIN"]
    user = "CapEff:\t0000000000000000\n"
    assert missing_capabilities(user) == ["CAP_NET_ADMIN", "CAP_SYS_ADMIN"]


def test_ip_failures_name_the_command_that_failed() -> None:
    batch = "link add mbabc123 type bridge\nlink set mbabc123 up\n"
    assert ip_failure(("-n", "ns1", "-batch", "-"), batch, "RTNETLINK answers: File exists\nCommand failed -:2\n") \
        == "`ip -n ns1 link set mbabc123 up` failed: RTNETLINK answers: File exists"
    assert ip_failure(("netns", "add", "x"), None, "mount --make-shared /run/netns failed: Operation not permitted\n") \
        == ("`ip netns add x` failed: mount --make-shared /run/netns failed: Operation not permitted"
            " (network namespaces need root: CAP_NET_ADMIN and CAP_SYS_ADMIN)")


def test_cluster_file_keeps_the_network_and_reads_files_without_one(tmp_path: Path) -> None:
    info = ClusterInfo(ZooKeeperEntry("10.200.0.2:2181", 7), network=plan_network("abc123", [1], routed=[]))
    info.save(tmp_path)
    assert ClusterInfo.load(tmp_path) == info
    (tmp_path / "cluster.json").write_text('{"zookeeper": {"connect": "127.0.0.1:2181", "pid": null},'
                                           ' "controllers": [], "brokers": []}')
    assert ClusterInfo.load(tmp_path).network is None


def test_partition_rules_drop_the_bridge_link_but_for_clients_when_kept() -> None:
    kept = partition_ruleset("10.200.0.1")
    assert 'iifname "eth0" ip saddr != 10.200.0.1 drop' in kept
    assert 'oifname "eth0" ip daddr != 10.200.0.1 drop' in kept
    assert 'iifname "eth0" meta nfproto ipv6 drop' in kept and 'oifname "eth0" meta nfproto ipv6 drop' in kept
    cut = partition_ruleset(None)
    assert 'iifname "eth0" drop' in cut and 'oifname "eth0" drop' in cut and "10.200.0.1" not in cut
    # Both replace the table in one transaction, whether it exists or not.
    for script in (kept, cut, reconnect_ruleset()):
        assert script.startswith("table inet minibroker_partition\ndelete table inet minibroker_partition\n")

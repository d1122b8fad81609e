"""zk.server.connect_members: zookeeper.connect's members, the servers a controller asks `srvr` of."""

from __future__ import annotations

from zk.server import connect_members


def test_connect_members_are_the_hosts_without_the_chroot() -> None:
    assert connect_members("zk1:2181, zk2:2182/kafka") == ["zk1:2181", "zk2:2182"]
    assert connect_members("127.0.0.1:2181") == ["127.0.0.1:2181"]

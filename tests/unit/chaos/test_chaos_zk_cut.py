"""expire-session's cut (chaos/zk_cut.py): reading a process's ZooKeeper connections from /proc, and the iptables
rules that drop them (pure; tests/integration/zookeeper/test_zk_ensemble.py cuts a real broker off)."""

from __future__ import annotations

from chaos.zk_cut import Connection, drop_rules, parse_address, parse_tcp_table, remove_rules

# /proc/<pid>/net/tcp: a listener, two connections to ZooKeeper (2181 = 0x0885, 2182 = 0x0886) owned by sockets
# 111 and 222, one to a broker port (9092 = 0x2384) and one of another process (inode 999).
TABLE = """\
  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:2384 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 100 1 0 100 0 0 10 0
   1: 0100007F:A1B2 0100007F:0885 01 00000000:00000000 00:00000000 00000000     0        0 111 1 0 20 4 30 10 -1
   2: 0B00C80A:C350 0200C80A:0886 01 00000000:00000000 00:00000000 00000000     0        0 222 1 0 20 4 30 10 -1
   3: 0100007F:B000 0100007F:2384 01 00000000:00000000 00:00000000 00000000     0        0 333 1 0 20 4 30 10 -1
   4: 0100007F:B001 0100007F:0885 01 00000000:00000000 00:00000000 00000000     0        0 999 1 0 20 4 30 10 -1
"""


def test_addresses_read_as_the_kernel_writes_them() -> None:
    assert parse_address("0100007F:0885") == ("127.0.0.1", 2181)
    assert parse_address("0B00C80A:C350") == ("10.200.0.11", 50000)


def test_only_the_processs_own_connections_to_zookeeper() -> None:
    assert parse_tcp_table(TABLE, {"100", "111", "222", "333"}, {2181, 2182}) == [
        Connection(("127.0.0.1", 41394), ("127.0.0.1", 2181)),
        Connection(("10.200.0.11", 50000), ("10.200.0.2", 2182)),
    ]


def test_the_cut_drops_the_cgroups_new_connections_and_both_ways_of_the_old_ones() -> None:
    old = Connection(("127.0.0.1", 41394), ("127.0.0.1", 2181))
    assert drop_rules("MB-ZKCUT-7", "/minibroker-zkcut-7", [2182, 2181, 2182], [old]) == [
        ["-N", "MB-ZKCUT-7"], ["-I", "OUTPUT", "-j", "MB-ZKCUT-7"], ["-I", "INPUT", "-j", "MB-ZKCUT-7"],
        ["-A", "MB-ZKCUT-7", "-p", "tcp", "-m", "cgroup", "--path", "/minibroker-zkcut-7", "-m", "multiport",
         "--dports", "2181,2182", "-j", "DROP"],
        ["-A", "MB-ZKCUT-7", "-p", "tcp", "-s", "127.0.0.1", "--sport", "41394", "-d", "127.0.0.1", "--dport",
         "2181", "-j", "DROP"],
        ["-A", "MB-ZKCUT-7", "-p", "tcp", "-s", "127.0.0.1", "--sport", "2181", "-d", "127.0.0.1", "--dport",
         "41394", "-j", "DROP"],
    ]
    assert remove_rules("MB-ZKCUT-7") == [["-D", "OUTPUT", "-j", "MB-ZKCUT-7"], ["-D", "INPUT", "-j", "MB-ZKCUT-7"],
                                          ["-F", "MB-ZKCUT-7"], ["-X", "MB-ZKCUT-7"]]


def test_a_containers_namespace_is_cut_whole() -> None:
    assert drop_rules("MB-ZKCUT-9", None, [2181])[3:] == [
        ["-A", "MB-ZKCUT-9", "-p", "tcp", "-m", "multiport", "--dports", "2181", "-j", "DROP"],
        ["-A", "MB-ZKCUT-9", "-p", "tcp", "-m", "multiport", "--sports", "2181", "-j", "DROP"],
    ]

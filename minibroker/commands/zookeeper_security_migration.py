"""`minibroker zookeeper-security-migration`: Kafka's zookeeper-security-migration.sh (ZkSecurityMigrator).

    KAFKA_OPTS=-Djava.security.auth.login.config=jaas.conf \\
      minibroker zookeeper-security-migration --zookeeper.acl secure --zookeeper.connect H:P[/chroot]
    minibroker zookeeper-security-migration --zookeeper.acl unsecure --data-dir D

Sets the ACLs of the root ("/", or the chroot) and of every znode under Kafka's secure root paths (/brokers,
/controller, /config, /admin, ...) to what `zookeeper.set.acl` creates (`secure`: ALL for the cluster's
ZooKeeper user, READ for the others but under /config/users and /config/brokers) or opens them (`unsecure`).
The tool logs in with the JAAS file's Client section (KAFKA_OPTS, as Kafka's tools; or the file of --data-dir's
secure cluster) and needs one, as Kafka's does.

Kafka's steps, here too: to secure a running cluster, restart each broker and controller with
`java.security.auth.login.config` set (same ZooKeeper user everywhere), then again with `zookeeper.set.acl=true`,
then run this with `--zookeeper.acl secure`. To open it, restart them with `zookeeper.set.acl=false`, run
`--zookeeper.acl unsecure`, then drop the JAAS file. `cluster up --security` on a data dir that ran open does
all of it for a local cluster.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from kazoo.exceptions import KazooException, NoAuthError

from minibroker.commands.client_options import UsageError, cluster_info, connect_zookeeper, zookeeper_security


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "zookeeper-security-migration", help="set Kafka's secure ZooKeeper ACLs on a cluster's znodes, or open them",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--zookeeper.acl", dest="acl", required=True, choices=("secure", "unsecure"),
                        help="make the Kafka znodes in ZooKeeper secure or unsecure")
    parser.add_argument("--zookeeper.connect", dest="zookeeper", metavar="HOST:PORT[/CHROOT]",
                        help="the ZooKeeper connect string (default: --data-dir's cluster's, else localhost:2181)")
    parser.add_argument("--data-dir", type=Path, metavar="DIR",
                        help="the cluster `minibroker cluster up --data-dir DIR` runs: its ZooKeeper and JAAS file")
    parser.add_argument("--zookeeper.session.timeout", dest="session_timeout", type=int, default=30000,
                        metavar="MS", help="the ZooKeeper session timeout (default 30000)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    logging.getLogger("kazoo").setLevel(logging.CRITICAL)
    secure = args.acl == "secure"
    try:
        connect = args.zookeeper or (cluster_info(args).zookeeper.connect if args.data_dir else "localhost:2181")
        security = zookeeper_security(args)
        if security.credentials is None:
            # Kafka's: "No JAAS configuration file has been specified...".
            raise UsageError("No JAAS configuration file has been specified. Please make sure that you set the"
                             " system property java.security.auth.login.config (KAFKA_OPTS=-Djava.security.auth."
                             "login.config=FILE) or give --data-dir of a secure cluster")
        with connect_zookeeper(connect, args.session_timeout / 1000, security) as zk:
            count = zk.migrate_acls(secure, report=print)
    except UsageError as e:
        print(f"ERROR: {e}", file=sys.stderr)
        return 1
    except NoAuthError:
        print("ERROR: ZooKeeper refused to change an ACL (NoAuth): the znodes belong to another ZooKeeper user",
              file=sys.stderr)
        return 1
    except KazooException as e:
        print(f"ERROR: {e!r}", file=sys.stderr)
        return 1
    print(f"Set {'secure' if secure else 'unsecure'} ACLs on {count} znodes at {connect}")
    return 0

"""A cluster of real processes on this machine, as a library: what `minibroker cluster`, `minibroker demo`,
the chaos tooling, the benches and the audit use to start, find and reach one. The command line
(minibroker/cli.py, minibroker/commands/) is built on it; nothing here imports the minibroker package (an
import-linter contract in pyproject.toml), so tooling reaches a cluster without the command line. Its
processes are still started as the command line's modules (`python -m minibroker.commands.broker`).

  cluster.py       LocalCluster: ZooKeeper, controllers and brokers started, stopped, killed (SIGKILL)
  cluster_file.py  cluster.json: what a running cluster's data dir says about its processes and addresses
  network.py       the virtual network of `cluster up --netns`: a network namespace per broker
  ports.py         which ports `cluster up` listens on: as before, --port-base's layout, or Kafka's well-known ones
  configs.py       the brokers' and controllers' .properties files, kept as the user edited them
  stale_sessions.py  the ZooKeeper registrations a killed cluster left, removed by the next `up`
  certificates.py  a development CA and the certificates it signs, as PEM files (Kafka's PEM key/truststores)
  security.py      `cluster up --security`: the data dir's CA, certificates, ZooKeeper JAAS file, admin user and
                   client properties, and the security keys of every config
"""

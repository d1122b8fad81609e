"""minibroker chaos: fault injection under load, and a verdict on what the clients saw (`minibroker chaos`).

    workload.py  idempotent acks=all writers, an acks=1 writer, readers; every outcome into the history
    clients/     the client library behind the workload: minibroker's own, confluent-kafka, kafka-python
    client_logs.py  the client libraries' log lines (librdkafka's too) into the run's clients.log
    group_workload.py  a consumer group's members sharing the topic, committing what they read (--group-members)
    txn_workload.py  consume-transform-produce processors copying the topic exactly once (--txn-processors)
    nemesis.py   the faults, on a seeded schedule, one at a time (kill-coordinator: the group's coordinator)
    cluster.py   what faults act on: the ChaosCluster protocol and the local-cluster backend
    compose_cluster.py  the ChaosCluster backend for a docker-compose cluster (`chaos run --compose`)
    compose.py   faults on a docker-compose cluster: its containers by service name
    netns.py     network partitions on a `cluster up --netns` cluster: cut a broker off, then heal
    zk_cut.py    expire-session's mechanism: one running process's ZooKeeper traffic dropped (cgroup, iptables)
    history.py   the history, as JSON lines
    checker.py   the safety checks, in Jepsen's Kafka checker's words (pure)
    txn_checker.py  the exactly-once checks of the transactional workload (pure)
    audit.py     the Spark audit of the log dirs, as a subprocess
    report.py    result.json, the text verdict, the picture
    runner.py    one run, start to history
"""

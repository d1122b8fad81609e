"""The cost of TLS (and SASL) on the Kafka listener against plaintext, in one run on one broker.

    .venv/bin/python bench/tls_bench.py [--records 50000] [--size 1024] [--seconds 4] [--rounds 3]

Starts a ZooKeeper and one broker whose listeners are PLAINTEXT, SSL and SASL_SSL on the same port range
(tests/integration/secure_cluster.py: the development CA's certificates, SCRAM users from `minibroker
configs`) and, for each protocol, on a topic of its own (one partition, RF 1):

- produces `--records` records of `--size` bytes with confluent-kafka (librdkafka; acks=all, linger.ms=5);
- consumes them all back with confluent-kafka;
- then the broker's read path alone: a raw client re-fetching up to 16 MiB from offset 0 for `--seconds`
  (PLAINTEXT: the header bytes, then the segment with sendfile; SSL: the segment read with os.pread and
  written through the TLS transport, since a TLS record must be encrypted in this process);

and prints MB/s of record payload (the raw fetches: of response bytes) and the broker's CPU seconds per MB
(utime+stime from /proc), each TLS figure also as a ratio of the plaintext one. SASL_SSL uses SCRAM-SHA-512:
after the login its connection is an SSL one, so it only adds the exchange at connect time. The protocols
take turns, `--rounds` times (a fresh topic each), and the median of the rounds is printed, so that a noisy
neighbour on a shared machine does not land on one protocol only.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from bench.kafka_vs_grpc import MB, FirstRecord, Phase, kafka_consume, kafka_produce, raw_kafka_fetches  # noqa: E402
from tests.integration.secure_cluster import SCRAM_PASSWORD, SCRAM_USER, start_secure_broker  # noqa: E402
from zk.server import LocalZooKeeper  # noqa: E402


def client_settings(secure: Any, protocol: str) -> dict[str, object]:
    settings: dict[str, object] = {"security.protocol": protocol}
    if protocol in ("SSL", "SASL_SSL"):
        settings["ssl.ca.location"] = str(secure.ca)
    if protocol == "SSL":  # the listener requires a client certificate
        settings.update({"ssl.certificate.location": str(secure.client.certificate),
                         "ssl.key.location": str(secure.client.key)})
    if protocol == "SASL_SSL":
        settings.update({"sasl.mechanism": "SCRAM-SHA-512", "sasl.username": SCRAM_USER,
                         "sasl.password": SCRAM_PASSWORD})
    return settings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    value = bytes(range(256)) * (args.size // 256) + bytes(args.size % 256)
    payload_mb = args.records * args.size / MB
    with tempfile.TemporaryDirectory(prefix="tls-bench-") as tmp:
        zookeeper = LocalZooKeeper(Path(tmp) / "zookeeper", fsync=False)
        zookeeper.start(timeout=60)
        broker = start_secure_broker(zookeeper, Path(tmp) / "broker")
        try:
            secure = next(broker)
            phase = Phase([secure.broker.popen.pid])
            admin = AdminClient({"bootstrap.servers": secure.address("PLAINTEXT")})
            samples: dict[str, dict[str, list[tuple[float, float]]]] = {}
            turns = [(r, p) for r in range(args.rounds) for p in ("PLAINTEXT", "SSL", "SASL_SSL")]
            for round_number, protocol in turns:
                topic = f"bench-{protocol.lower()}-{round_number}"
                admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(60)
                time.sleep(1)  # the controller's LeaderAndIsr for the new partition
                bootstrap, extra = secure.address(protocol), client_settings(secure, protocol)
                row = samples.setdefault(protocol, {})
                n, seconds, cpu = phase.run(kafka_produce(bootstrap, topic, args.records, value,
                                                          {"linger.ms": 5, **extra}))
                row.setdefault("produce", []).append((n * args.size / MB / seconds, cpu / payload_mb))
                work, close = kafka_consume(bootstrap, topic, 1, args.records, FirstRecord(), extra)
                n, seconds, cpu = phase.run(work)
                close()
                assert n == args.records, f"{protocol}: consumed {n} of {args.records}"
                row.setdefault("consume", []).append((n * args.size / MB / seconds, cpu / payload_mb))
                if protocol != "SASL_SSL":
                    tls = secure.client_tls(secure.client) if protocol == "SSL" else None
                    received, seconds, cpu = phase.run(raw_kafka_fetches(bootstrap, topic, args.seconds, tls))
                    row.setdefault("raw fetch", []).append((received / MB / seconds, cpu / (received / MB)))
        finally:
            broker.close()
            zookeeper.stop()
    rows = {protocol: {name: (statistics.median(r for r, _ in runs), statistics.median(c for _, c in runs))
                       for name, runs in phases.items()} for protocol, phases in samples.items()}
    print(f"\n{args.records} records of {args.size} B ({payload_mb:.0f} MB) per protocol and round, one broker,"
          f" confluent-kafka {__import__('confluent_kafka').libversion()[0]}; median of {args.rounds} rounds\n")
    print(f"{'phase':<10} {'protocol':<10} {'MB/s':>9} {'x plain':>8} {'broker CPU s/MB':>16} {'x plain':>8}")
    for phase_name in ("produce", "consume", "raw fetch"):
        plain_rate, plain_cpu = rows["PLAINTEXT"][phase_name]
        for protocol, medians in rows.items():
            if phase_name in medians:
                rate, cpu = medians[phase_name]
                print(f"{phase_name:<10} {protocol:<10} {rate:>9.1f} {rate / plain_rate:>8.2f} {cpu:>16.4f}"
                      f" {cpu / plain_cpu:>8.2f}")


if __name__ == "__main__":
    main()

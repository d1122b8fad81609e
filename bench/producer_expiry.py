"""What idle producers cost a broker, and what Kafka's PeriodicProducerExpirationCheck gives back.

    .venv/bin/python bench/producer_expiry.py [--producers 100000]

One log (through a LogManager, as the broker builds it) takes one idempotent batch from each of `--producers`
producer ids; the process's resident memory (VmRSS) is read before and after. Then the clock passes
producer.id.expiration.ms and the LogManager runs the expiration check (`remove_expired_producers`, what the
broker's "PeriodicProducerExpirationCheck" task calls every producer.id.expiration.check.interval.ms): the
producers left and the memory are printed again.
"""

from __future__ import annotations

import argparse
import gc
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from broker.log.config import LogConfig  # noqa: E402
from broker.log.manager import LogManager  # noqa: E402
from common.record import ProducerRecord, build_batch  # noqa: E402
from proto.types import TopicPartition  # noqa: E402

EXPIRATION_MS = 60_000


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--producers", type=int, default=100_000)
    args = parser.parse_args()
    now = [int(time.time() * 1000)]
    manager = LogManager([Path(tempfile.mkdtemp(prefix="minibroker-producer-expiry-"))],
                         LogConfig(segment_bytes=1 << 30), broker_id=1, time_ms=lambda: now[0],
                         producer_id_expiration_ms=EXPIRATION_MS)
    manager.startup()
    log = manager.get_or_create_log(TopicPartition("idempotent", 0))
    before = rss_mb()
    for pid in range(args.producers):
        log.append_as_leader(build_batch([ProducerRecord(b"v")], producer_id=pid, producer_epoch=0, base_sequence=0,
                                         now_ms=now[0]), 0)
    loaded = rss_mb()
    print(f"{len(log.producer_state.active_producers)} producers: VmRSS {before:.0f} -> {loaded:.0f} MB"
          f" ({loaded - before:+.0f} MB)")
    now[0] += EXPIRATION_MS + 1
    manager.remove_expired_producers()
    gc.collect()
    print(f"after the expiration check: {len(log.producer_state.active_producers)} producers, VmRSS {rss_mb():.0f} MB")
    manager.shutdown()


if __name__ == "__main__":
    main()

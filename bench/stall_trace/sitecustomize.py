"""A broker's event-loop stalls, explained: with `STALL_TRACE=<prefix>` in its environment and this directory on
its PYTHONPATH (`bench/partitions.py --trace-stalls DIR` sets both), every broker process writes
`<prefix>.<pid>`: its command line, then

- `loop busy N ms`: each stretch over 100 ms in which the main thread (the event loop) was seen out of
  `select()` by a sampler thread looking every 5 ms, with the loop callbacks that ran (`top`) and the commonest
  stacks;
- `GC genN N ms`: each garbage collection over 10 ms, the thread it ran in and the objects frozen (`gc.freeze`);
- `sampler gap N ms`: the sampler itself not running for over 60 ms (another thread held the GIL, or the
  machine did not schedule the process).

Python imports `sitecustomize` at start-up, before any of the broker's code: nothing in the broker knows of it.
Samples are 5 ms apart and the sampler needs the GIL, so a stretch's sample count times 5 ms is the part of it
the loop thread held the GIL for, at most. Processes other than brokers are left alone.
"""

from __future__ import annotations

import os
import sys

_SLOW_MS = 100
_SAMPLE_S = 0.005


def _start(prefix: str) -> None:
    import collections
    import gc
    import threading
    import time
    from types import FrameType
    from typing import Any

    out = open(f"{prefix}.{os.getpid()}", "w", buffering=1)  # noqa: SIM115 (open for the process's life)
    out.write(" ".join(sys.argv) + "\n")
    main_id = threading.main_thread().ident
    gc_began = [0.0]

    def on_gc(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            gc_began[0] = time.perf_counter()
            return
        took = (time.perf_counter() - gc_began[0]) * 1000
        if took > 10:
            out.write(f"{time.time():.3f} GC gen{info['generation']} {took:.0f} ms collected {info['collected']}"
                      f" thread {threading.current_thread().name} frozen {gc.get_freeze_count()}\n")

    def stack(frame: FrameType | None) -> str:
        parts: list[str] = []
        while frame is not None and len(parts) < 14:
            parts.append(f"{frame.f_code.co_name}@{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}")
            frame = frame.f_back
        return " < ".join(parts)

    def callback_of(frame: FrameType | None) -> str | None:
        """The function the loop's `Handle._run` called: which callback is running."""
        while frame is not None:
            caller = frame.f_back
            if (caller is not None and caller.f_code.co_name == "_run"
                    and caller.f_code.co_filename.endswith("events.py")):
                return f"{frame.f_code.co_name}@{os.path.basename(frame.f_code.co_filename)}"
            frame = caller
        return None

    def sample() -> None:
        busy_since: float | None = None
        stacks: collections.Counter[str] = collections.Counter()
        callbacks: collections.Counter[str] = collections.Counter()
        last = time.perf_counter()
        while True:
            time.sleep(_SAMPLE_S)
            now = time.perf_counter()
            if now - last > 0.06:
                out.write(f"{time.time():.3f} sampler gap {(now - last) * 1000:.0f} ms\n")
            last = now
            frame = sys._current_frames().get(main_id) if main_id is not None else None
            if frame is None:
                continue
            if frame.f_code.co_name == "select" and frame.f_code.co_filename.endswith("selectors.py"):
                if busy_since is not None and (now - busy_since) * 1000 > _SLOW_MS:
                    out.write(f"{time.time():.3f} loop busy {(now - busy_since) * 1000:.0f} ms,"
                              f" {sum(stacks.values())} samples\n")
                    out.writelines(f"  top {n} {name}\n" for name, n in callbacks.most_common(6))
                    out.writelines(f"  {n} {s}\n" for s, n in stacks.most_common(6))
                busy_since = None
                stacks.clear()
                callbacks.clear()
                continue
            if busy_since is None:
                busy_since = now
            stacks[stack(frame)] += 1
            callback = callback_of(frame)
            if callback is not None:
                callbacks[callback] += 1

    gc.callbacks.append(on_gc)
    threading.Thread(target=sample, name="stall-trace", daemon=True).start()


# At start-up sys.argv is ['-m', '--config', '.../server.properties'] for a broker.
if os.environ.get("STALL_TRACE") and any(arg.endswith("server.properties") for arg in sys.argv):
    _start(os.environ["STALL_TRACE"])

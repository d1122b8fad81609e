"""The console's process: the collector's thread and the web server on one asyncio loop, until Ctrl-C."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

from aiohttp import web

from common.grpc_tls import GrpcSecurity
from console.collector import Collector
from console.local import LocalProcesses
from console.log_dirs import LogDirs
from console.remote import RemoteCluster
from console.server import create_app


def serve(bootstrap_servers: str, security: GrpcSecurity, *, data_dir: Path | None, host: str, port: int,
          interval_ms: int, allow_faults: bool, kafka: tuple[str, dict[str, str]] | None = None,
          kafka_properties: dict[str, str] | None = None) -> int:
    """`kafka`: a --data-dir cluster's Kafka listeners and the admin's kafka-python properties, to ask
    DescribeLogDirs. Without a data dir the brokers tell the controller's events, ZooKeeper and a Kafka listener,
    asked with `kafka_properties`."""
    local = LocalProcesses(data_dir) if data_dir is not None else None
    remote = RemoteCluster(security) if data_dir is None else None
    collector = Collector(bootstrap_servers, security, interval_ms=interval_ms, local=local,
                          log_dirs=LogDirs(*kafka) if kafka is not None else None, remote=remote,
                          kafka_properties=kafka_properties)
    if local is not None:
        local.record = collector.record
    try:
        asyncio.run(_serve(create_app(collector, local, allow_faults), collector, host, port))
    except OSError as e:  # the port is taken, the address not this machine's
        print(f"minibroker console: cannot serve on {host}:{port}: {e.strerror or e}", file=sys.stderr)
        return 1
    finally:
        collector.stop()
        if local is not None:
            local.close()
    return 0


async def _serve(app: web.Application, collector: Collector, host: str, port: int) -> None:
    # Open event streams are cut at once on Ctrl-C: a page reconnects by itself when the console is back.
    runner = web.AppRunner(app, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    collector.start()  # once there is a page to serve: a port in use asks the cluster nothing
    bound = runner.addresses[0][1] if runner.addresses else port
    shown = f"[{host}]" if ":" in host else host
    # The one line a user (and the browser test) reads: where to point the browser.
    print(f"minibroker console at http://{shown}:{bound}/ (Ctrl-C stops it)", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()
    await runner.cleanup()

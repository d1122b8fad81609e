"""The console's web server (aiohttp): the page, its pictures pushed as server-sent events, and the fault buttons.

  GET  /                     the page (console/static/index.html, console.js, console.css: no CDN, no build)
  GET  /api/stream?topic=T   server-sent events: each new picture of the collector, as JSON; the collector
                             polls the cluster only while at least one stream is open
  GET  /api/picture?topic=T  the latest picture, once (as old as the last time a stream was open)
  POST /api/faults/broker/{id}/{sigkill|sigstop|sigcont|restart}
  POST /api/faults/controller/kill
                             only with --allow-faults on a local cluster; 403 otherwise

Every POST must carry `X-Requested-By: minibroker-console` and, if it has an Origin, come from the console's own
origin: another web page open in the same browser can send a plain cross-site POST to 127.0.0.1, but not a
custom header (that needs a CORS preflight this server never grants), so it cannot press a fault button.

A picture holds every partition of the topic asked for, or with no topic the
partitions of the cluster's own topics up to MAX_PARTITIONS (the page's topic
list names them all): a cluster of a thousand partitions is not redrawn whole
twice a second.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path
from typing import Any

from aiohttp import web

from console.collector import Collector, Picture
from console.local import FaultError, LocalProcesses

STATIC = Path(__file__).parent / "static"
MAX_PARTITIONS = 60
# How often a stream looks for a new picture: well under the collector's interval.
_STREAM_POLL_S = 0.05

COLLECTOR = web.AppKey("collector", Collector)
REQUESTED_BY = ("X-Requested-By", "minibroker-console")


@web.middleware
async def same_origin_posts(request: web.Request, handler: Any) -> web.StreamResponse:
    """Refuse a POST that another site's page could have sent (see the module's docstring)."""
    if request.method == "POST":
        origin = request.headers.get("Origin")
        foreign = origin is not None and origin.split("://", 1)[-1] != request.host
        if request.headers.get(REQUESTED_BY[0]) != REQUESTED_BY[1] or foreign:
            return web.json_response({"error": "a console action needs the console's own page"}, status=403)
    response: web.StreamResponse = await handler(request)
    return response


def picture_json(picture: Picture, topic: str | None, faults: bool) -> dict[str, Any]:
    """The picture as the page gets it: the partitions of `topic` (or of the first non-internal topics)."""
    internal = {t["name"] for t in picture.topics if t["internal"]}
    if topic:
        partitions = [p for p in picture.partitions if p["topic"] == topic]
    else:
        partitions = [p for p in picture.partitions if p["topic"] not in internal][:MAX_PARTITIONS]
    out = dataclasses.asdict(picture)
    out["partitions"] = partitions
    out["faults_allowed"] = faults
    return out


def create_app(collector: Collector, local: LocalProcesses | None, allow_faults: bool) -> web.Application:
    app = web.Application(middlewares=[same_origin_posts])
    app[COLLECTOR] = collector
    faults = local if allow_faults and local is not None else None

    async def index(_: web.Request) -> web.FileResponse:
        return web.FileResponse(STATIC / "index.html")

    async def picture(request: web.Request) -> web.Response:
        return web.json_response(picture_json(collector.picture, request.query.get("topic"), faults is not None))

    async def stream(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await response.prepare(request)
        topic = request.query.get("topic")
        version = -1
        collector.pages.subscribe()
        try:
            while True:
                current = collector.picture
                if current.version != version:
                    version = current.version
                    data = json.dumps(picture_json(current, topic, faults is not None), separators=(",", ":"))
                    await response.write(f"data: {data}\n\n".encode())
                await asyncio.sleep(_STREAM_POLL_S)
        except ConnectionResetError:  # the page went away
            pass
        finally:  # gone, or cut by the server's shutdown
            collector.pages.unsubscribe()
        return response

    async def broker_fault(request: web.Request) -> web.Response:
        if faults is None:
            return _no_faults(local)
        broker_id, fault = int(request.match_info["broker_id"]), request.match_info["fault"]
        try:
            done = faults.restart_broker(broker_id) if fault == "restart" else faults.broker_fault(broker_id, fault)
        except FaultError as e:
            return web.json_response({"error": str(e)}, status=409)
        return web.json_response({"done": done})

    async def kill_controller(_: web.Request) -> web.Response:
        if faults is None:
            return _no_faults(local)
        try:
            done = await asyncio.to_thread(faults.kill_controller)
        except FaultError as e:
            return web.json_response({"error": str(e)}, status=409)
        return web.json_response({"done": done})

    app.add_routes([
        web.get("/", index),
        web.get("/api/picture", picture),
        web.get("/api/stream", stream),
        web.post(r"/api/faults/broker/{broker_id:\d+}/{fault:sigkill|sigstop|sigcont|restart}", broker_fault),
        web.post("/api/faults/controller/kill", kill_controller),
        web.static("/static", STATIC),
    ])
    return app


def _no_faults(local: LocalProcesses | None) -> web.Response:
    why = "faults are for a local cluster (--data-dir)" if local is None else "start the console with --allow-faults"
    return web.json_response({"error": why}, status=403)

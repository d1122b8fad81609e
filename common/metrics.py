"""MetricsEndpoint: a Prometheus registry of a process's own, served over HTTP (the broker's and the
controller's `metrics.port`); the metrics themselves live with their process."""

from __future__ import annotations

import logging
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, start_http_server

logger = logging.getLogger(__name__)


class MetricsEndpoint:
    """A registry of its own, served over HTTP on demand (the broker's and the controller's `metrics.port`)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._http: WSGIServer | None = None

    def serve(self, port: int, host: str = "0.0.0.0") -> None:
        """Expose the registry at http://host:port/metrics."""
        self._http, _ = start_http_server(port, host, registry=self.registry)
        logger.info("Serving Prometheus metrics on %s:%d", host, self._http.server_port)

    def close(self) -> None:
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
            self._http = None

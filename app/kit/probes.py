"""A process's metrics port, with a liveness probe beside the Prometheus figures.

``GET /healthz`` answers 200 while ``alive()`` holds and 503 otherwise (a wedged event loop:
Kubernetes restarts the pod); every other path serves the metrics, as
``prometheus_client.start_http_server`` does. Served from a thread, so it answers even when
the event loop is stuck, which is what lets the probe see it."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import make_wsgi_app


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        return None


def probe_app(alive: Callable[[], bool]) -> Callable[..., Iterable[bytes]]:
    metrics = make_wsgi_app()

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("PATH_INFO") == "/healthz":
            ok = alive()
            start_response("200 OK" if ok else "503 Service Unavailable", [])
            return [b"ok\n" if ok else b"the event loop has not turned lately\n"]
        body: Iterable[bytes] = metrics(environ, start_response)
        return body

    return app


def start_probe_server(port: int, alive: Callable[[], bool], host: str = "0.0.0.0") -> WSGIServer:
    """Serve from a thread until the process ends, or until the server's ``shutdown()``."""
    server = make_server(host, port, probe_app(alive), _Server, handler_class=_Quiet)
    threading.Thread(target=server.serve_forever, name="probes", daemon=True).start()
    return server

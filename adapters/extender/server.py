"""The HTTP side of the extender: routes, limits, and answers that never take it down.

This module owns serving `ExtenderService` over HTTP/1.1 on a threading server, so
requests are served concurrently: POST `/filter`, `/prioritize`, `/bind`, `/preempt`
(kube-scheduler's `urlPrefix` is the server's address and the verbs are their names)
and GET `/healthz`. Malformed JSON or a wrong shape is a 400 with a JSON error, a body
over the size limit a 413, an unknown path a 404, a guest failure in prioritize a 500;
none of them stops the server.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import structlog

from adapters.extender import protocol
from adapters.extender.service import ExtenderCallError, ExtenderService

log = structlog.get_logger("adapters.extender.server")

#: Largest request body accepted, in bytes (a NodeList of thousands of nodes fits).
DEFAULT_MAX_BODY = 64 * 1024 * 1024


class ExtenderServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], service: ExtenderService, max_body: int = DEFAULT_MAX_BODY) -> None:
        super().__init__(address, _Handler)
        self.service = service
        self.max_body = max_body
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host if isinstance(host, str) else host.decode()}:{port}"

    def start_background(self) -> ExtenderServer:
        self._thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="extender-http", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)


class _Handler(BaseHTTPRequestHandler):
    server: ExtenderServer
    protocol_version = "HTTP/1.1"
    # Headers and body go out in separate writes: with Nagle's algorithm on, a keep-alive
    # client's delayed ACK would hold every answer for ~40 ms.
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass  # requests are logged through structlog below

    def _send(self, status: int, body: Any) -> None:
        data = json.dumps(body, separators=(",", ":")).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        if self.path.rstrip("/") in ("/healthz", "/readyz", "/livez"):
            self._send(200, {"status": "ok"})
        else:
            self._send(404, {"error": f"no such path {self.path}"})

    def do_POST(self) -> None:  # noqa: N802
        started = time.perf_counter()
        verb = self.path.strip("/").split("?", 1)[0].rsplit("/", 1)[-1]
        handler = _VERBS.get(verb)
        length_header = self.headers.get("Content-Length")
        if handler is None:
            self._discard_body(length_header)
            self._send(404, {"error": f"no such verb {self.path}; use /filter, /prioritize, /bind or /preempt"})
            return
        try:
            length = int(length_header or "0")
        except ValueError:
            self._send(400, {"error": "bad Content-Length"})
            return
        if length > self.server.max_body:
            self.close_connection = True
            self._send(413, {"error": f"body of {length} bytes is over the limit of {self.server.max_body}"})
            return
        body = self.rfile.read(length)
        try:
            answer = handler(self.server.service, protocol.parse_json(body))
            status = 200
        except protocol.ProtocolError as exc:
            answer, status = {"error": str(exc)}, 400
        except ExtenderCallError as exc:
            answer, status = {"error": str(exc)}, 500
        except Exception as exc:  # a bug of ours: answered, logged, the server stays up
            log.error("extender.internal_error", verb=verb, exc_info=exc)
            answer, status = {"error": f"internal error: {type(exc).__name__}: {exc}"}, 500
        self._send(status, answer)
        log.debug("extender.request", verb=verb, status=status,
                  duration_ms=round((time.perf_counter() - started) * 1000, 3))

    def _discard_body(self, length_header: str | None) -> None:
        if length_header and length_header.isdigit() and int(length_header) <= self.server.max_body:
            self.rfile.read(int(length_header))
        else:
            self.close_connection = True


def _filter(service: ExtenderService, body: Any) -> Any:
    return service.filter(protocol.ExtenderArgs.decode(body))


def _prioritize(service: ExtenderService, body: Any) -> Any:
    return service.prioritize(protocol.ExtenderArgs.decode(body))


def _bind(service: ExtenderService, body: Any) -> Any:
    return service.bind(protocol.BindingArgs.decode(body))


def _preempt(service: ExtenderService, body: Any) -> Any:
    return service.preempt(protocol.PreemptionArgs.decode(body))


_VERBS = {"filter": _filter, "prioritize": _prioritize, "bind": _bind, "preempt": _preempt}

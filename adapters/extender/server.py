"""The HTTP side of the extender: routes, limits, security, and answers that never take it down.

This module owns serving `ExtenderService` over HTTP/1.1 (or HTTPS), one thread per
connection: a POST to each verb (`Verbs`: the paths kube-scheduler's `filterVerb`,
`prioritizeVerb`, `bindVerb` and `preemptVerb` name, `filter`, `prioritize`, `bind` and
`preempt` by default, under whatever path its `urlPrefix` has) and GET or HEAD
`/healthz`, `/readyz`, `/livez`. It also owns what a client may cost the process
(`ServerLimits`: listen backlog, simultaneous connections, the time a request may take
to arrive, how long an idle keep-alive connection is kept, the body size), who may call
the verbs (`ServerSecurity`: TLS, client certificates, a bearer token) and the drain on
shutdown (stop accepting, close idle connections, let requests in flight finish).

Malformed JSON, a wrong shape or bad framing is a 400 with a JSON error, a body over the
size limit a 413, an unknown path a 404, a guest failure in prioritize a 500 with the
service's message; a bug of ours is a 500 with a generic message and an error id that
the error's log line carries too. None of them stops the server, and nothing is printed
to stderr except through structlog.
"""

from __future__ import annotations

import contextlib
import hmac
import io
import json
import os
import re
import secrets
import socket
import socketserver
import ssl
import stat
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, fields
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, Protocol

import pykka

from wasm_scheduler.adapters.extender import protocol
from wasm_scheduler.adapters.extender.service import ExtenderCallError, ExtenderService
from wasm_scheduler.adapters.framework.cluster import read_regular_file
from wasm_scheduler.adapters.framework.errors import UserError, clip
from wasm_scheduler.logger import get_logger

log = get_logger("adapters.extender.server")

#: Largest request body accepted, in bytes (a NodeList of thousands of nodes fits).
DEFAULT_MAX_BODY = 64 * 1024 * 1024
#: Seconds a connection may take to deliver a whole request (headers and body), counted from
#: its connect (a first request) or from the first byte of a request on a kept-alive connection.
DEFAULT_READ_TIMEOUT_S = 30.0
#: Seconds a kept-alive connection may sit idle between requests. Above the 90 s that Go's
#: HTTP client (kube-scheduler's) keeps an idle connection: the client closes it first, so it
#: never sends a request on a connection the server is closing (it does not retry a POST).
DEFAULT_IDLE_TIMEOUT_S = 120.0
#: Connections served at once; more are answered 503 and closed without a thread.
DEFAULT_MAX_CONNECTIONS = 256
#: Length of the kernel's queue of connections not yet accepted (capped by net.core.somaxconn).
DEFAULT_BACKLOG = 1024
#: Seconds the drain on shutdown waits for requests in flight.
DEFAULT_DRAIN_S = 10.0
#: Largest --token-file read, in bytes.
MAX_TOKEN_BYTES = 64 * 1024

#: After the last answer, how long and how much unread input is discarded before the socket is
#: closed: closing with unread input makes the kernel send a reset, which can destroy the answer
#: (a 400 or 413 sent before the body was read) before the client reads it.
LINGER_S = 1.0
LINGER_BYTES = 1024 * 1024

_HEALTH_PATHS = ("/healthz", "/readyz", "/livez")
_DIGITS = re.compile(r"[0-9]{1,19}")
_REFUSED = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
            b"Retry-After: 1\r\nConnection: close\r\n\r\n%s")
_REFUSED_BODY = b'{"error":"too many connections"}'


@dataclass(frozen=True)
class ServerLimits:
    """What one client, or many, may cost the server; every field has a default that suits kube-scheduler."""

    max_body: int = DEFAULT_MAX_BODY
    read_timeout_s: float = DEFAULT_READ_TIMEOUT_S
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    backlog: int = DEFAULT_BACKLOG
    drain_s: float = DEFAULT_DRAIN_S
    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S


#: What a verb's path may hold (a URL path's unreserved characters and slashes).
_VERB_PATH = re.compile(r"[A-Za-z0-9._~-]+(?:/[A-Za-z0-9._~-]+)*")


@dataclass(frozen=True)
class Verbs:
    """The path of each verb under kube-scheduler's `urlPrefix`: its extender entry's
    `filterVerb`, `prioritizeVerb`, `bindVerb` and `preemptVerb`. A request is routed by the
    end of its path (whatever path the urlPrefix has before it), the longest verb first."""

    filter: str = "filter"
    prioritize: str = "prioritize"
    bind: str = "bind"
    preempt: str = "preempt"

    def checked(self) -> Verbs:
        """These verbs, or a UserError naming the option of a bad one."""
        seen: dict[str, str] = {}
        for item in fields(self):
            option, path = f"--{item.name}-verb", getattr(self, item.name)
            if not _VERB_PATH.fullmatch(path):
                raise UserError(f"{option} {clip(path)!r}: expected a URL path such as {item.name} (letters, digits, "
                                "'.', '_', '~', '-', and '/' between them), as kube-scheduler's "
                                f"{item.name}Verb says")
            if path in seen:
                raise UserError(f"{option} {path}: the same path as --{seen[path]}-verb")
            seen[path] = item.name
        return self

    def route(self, path: str) -> str:
        """The verb ("filter", ...) whose path ends the request's path; "" when none does."""
        path = path.split("?", 1)[0].strip("/")
        best, best_length = "", -1
        for item in fields(self):
            verb_path = getattr(self, item.name)
            if (path == verb_path or path.endswith("/" + verb_path)) and len(verb_path) > best_length:
                best, best_length = item.name, len(verb_path)
        return best

    def paths(self) -> list[str]:
        return ["/" + getattr(self, item.name) for item in fields(self)]


class Flag(Protocol):
    """What the drain asks whether to cut itself short (a threading.Event does)."""

    def is_set(self) -> bool: ...


@dataclass(frozen=True)
class ServerSecurity:
    """TLS (with client certificates when the context requires them) and an optional bearer token."""

    tls: ssl.SSLContext | None = None
    token: bytes | None = None


def tls_context(cert: Path, key: Path, client_ca: Path | None = None) -> ssl.SSLContext:
    """A server TLS context from PEM files; with `client_ca`, clients must present a certificate it signed."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    for option, path in (("--tls-cert", cert), ("--tls-key", key), ("--client-ca", client_ca)):
        problem = _file_problem(path) if path is not None else ""
        if problem:
            raise UserError(f"{option} {path}: {problem}")
    try:
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise UserError(f"--tls-cert {cert} / --tls-key {key}: cannot load the certificate and key: "
                        f"{_reason(exc)}") from None
    if client_ca is not None:
        try:
            context.load_verify_locations(cafile=client_ca)
        except (OSError, ssl.SSLError) as exc:
            raise UserError(f"--client-ca {client_ca}: cannot load the CA certificates: {_reason(exc)}") from None
        context.verify_mode = ssl.CERT_REQUIRED
    return context


def _file_problem(path: Path) -> str:
    """Why `path` is not a regular file to read ("" when it is one), in the words an operator
    needs: a FIFO or a folder is not "no such file"."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "no such file"
    except (OSError, ValueError) as exc:
        return f"cannot read it: {getattr(exc, 'strerror', None) or exc}"
    if stat.S_ISREG(mode):
        return ""
    for test, what in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device")):
        if test(mode):
            return f"is {what}, not a regular file"
    return "is not a regular file"


def read_token(path: Path) -> bytes:
    """The bearer token in `path` (surrounding whitespace dropped); a file that is not a regular
    one of at most `MAX_TOKEN_BYTES` (a device, a FIFO: read like --config), unreadable or empty
    is a UserError."""
    problem = _file_problem(path)
    if problem:
        raise UserError(f"--token-file {path}: {problem}")
    try:
        token = read_regular_file(path, "token", MAX_TOKEN_BYTES).strip()
    except UserError as exc:
        raise UserError(f"--token-file {exc}") from None
    if not token:
        raise UserError(f"--token-file {path}: the file is empty")
    if any(b < 0x21 or b > 0x7E for b in token):
        raise UserError(f"--token-file {path}: the token must be one line of printable ASCII without spaces")
    return token


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLError) and exc.reason:
        return str(exc.reason)
    return str(getattr(exc, "strerror", None) or exc)


class ExtenderServer(socketserver.TCPServer):
    """The extender's HTTP server; `start_background()` serves, `stop()` drains and closes."""

    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], service: ExtenderService, max_body: int | None = None,
                 limits: ServerLimits | None = None, security: ServerSecurity | None = None,
                 verbs: Verbs | None = None) -> None:
        limits = limits or ServerLimits()
        if max_body is not None:
            limits = ServerLimits(max_body, limits.read_timeout_s, limits.max_connections, limits.backlog,
                                  limits.drain_s, limits.idle_timeout_s)
        self.limits = limits
        self.security = security or ServerSecurity()
        self.verbs = (verbs or Verbs()).checked()
        self.service = service
        self.request_queue_size = max(limits.backlog, 1)
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._open = 0                       # connections with a thread
        self._idle: set[_Handler] = set()    # of those, the ones waiting for a request
        self._draining = False
        self._thread: threading.Thread | None = None
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, _Handler)

    @property
    def max_body(self) -> int:
        return self.limits.max_body

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        host = host if isinstance(host, str) else host.decode()
        scheme = "https" if self.security.tls is not None else "http"
        return f"{scheme}://{f'[{host}]' if ':' in host else host}:{port}"

    @property
    def draining(self) -> bool:
        return self._draining

    @property
    def open_connections(self) -> int:
        with self._lock:
            return self._open

    def start_background(self) -> ExtenderServer:
        self._thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="extender-http", daemon=True)
        self._thread.start()
        return self

    # -- connections -------------------------------------------------------------------

    def process_request(self, request: Any, client_address: Any) -> None:
        """Runs on the accepting thread: a thread for the connection, or a 503 when there is no room."""
        with self._lock:
            admitted = not self._draining and self._open < self.limits.max_connections
            if admitted:
                self._open += 1
        if not admitted:
            self._refuse(request, client_address, "draining" if self._draining else "max_connections")
            return
        try:
            threading.Thread(target=self._serve_connection, args=(request, client_address),
                             name="extender-conn", daemon=True).start()
        except RuntimeError as exc:  # the system has no thread to spare
            self._release()
            self._refuse(request, client_address, f"no thread: {exc}")

    def _refuse(self, request: socket.socket, client_address: Any, reason: str) -> None:
        log.warning("extender.connection_refused", client=_client(client_address), reason=reason,
                    max_connections=self.limits.max_connections)
        if self.security.tls is None:
            try:  # a fresh socket's send buffer is empty: this never blocks the accepting thread
                request.setblocking(False)
                request.send(_REFUSED % (len(_REFUSED_BODY), _REFUSED_BODY))
            except OSError:
                pass
        self.shutdown_request(request)

    def _serve_connection(self, request: socket.socket, client_address: Any) -> None:
        try:
            self.finish_request(request, client_address)
        except Exception:
            self.handle_error(request, client_address)
        finally:
            self.shutdown_request(request)
            self._release()

    def _release(self) -> None:
        with self._lock:
            self._open -= 1
            self._changed.notify_all()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """An exception escaped a connection: one structured log line, never a traceback on stderr."""
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, TimeoutError, ssl.SSLError)):
            log.debug("extender.connection_lost", client=_client(client_address), error=repr(exc))
        else:
            log.error("extender.connection_failed", client=_client(client_address), error_id=secrets.token_hex(6),
                      exc_info=exc)

    def _enter_idle(self, handler: _Handler) -> bool:
        with self._lock:
            if self._draining:
                return False
            self._idle.add(handler)
            return True

    def _leave_idle(self, handler: _Handler) -> None:
        with self._lock:
            self._idle.discard(handler)

    # -- shutdown ----------------------------------------------------------------------

    def drain(self, timeout_s: float | None = None, hurry: Flag | None = None) -> int:
        """Stop accepting, close idle connections, and wait up to `timeout_s` (the limits' drain time by
        default; cut short when `hurry` is set) for requests in flight. Returns the connections still open."""
        timeout_s = self.limits.drain_s if timeout_s is None else timeout_s
        if self._thread is not None and self._thread.is_alive():
            self.shutdown()
            self._thread.join(timeout=5)
        with self._lock:
            first = not self._draining
            self._draining = True
            for handler in self._idle:  # blocked waiting for a request that will not be served
                handler.abort()
            self._idle.clear()
        if first:
            self.socket.close()  # new connections are refused from here on
        deadline = time.monotonic() + max(timeout_s, 0.0)
        with self._lock:
            if first and self._open:
                log.info("extender.draining", connections=self._open, drain_s=timeout_s)
            while self._open and time.monotonic() < deadline and not (hurry is not None and hurry.is_set()):
                self._changed.wait(min(0.05, max(deadline - time.monotonic(), 0.0)))
            left = self._open
        if left:
            log.warning("extender.drain_incomplete", connections=left, drain_s=timeout_s)
        return left

    def stop(self, drain_s: float | None = None, hurry: Flag | None = None) -> None:
        """Drain (see `drain`) and close the listening socket."""
        self.drain(drain_s, hurry)
        self.server_close()


def _client(address: Any) -> str:
    if isinstance(address, tuple) and len(address) >= 2:
        return f"{address[0]}:{address[1]}"
    return str(address)


class _DeadlineReader(io.RawIOBase):
    """Reads from a socket, each read bounded by what is left of the handler's deadline."""

    def __init__(self, handler: _Handler) -> None:
        self._handler = handler

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        remaining = self._handler.deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("the request did not arrive in time")
        connection = self._handler.connection
        connection.settimeout(remaining)
        return connection.recv_into(buffer)


class _Writer(io.BufferedIOBase):
    """Writes to the connection whole, each write bounded by the read timeout (a client that does
    not read its answer cannot hold the thread for longer)."""

    def __init__(self, handler: _Handler) -> None:
        self._handler = handler

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        connection = self._handler.connection
        connection.settimeout(self._handler.server.limits.read_timeout_s)
        connection.sendall(data)
        return memoryview(data).nbytes


class _Handler(BaseHTTPRequestHandler):
    server: ExtenderServer
    protocol_version = "HTTP/1.1"
    connection: socket.socket

    def setup(self) -> None:
        self.connection = self.request
        self.deadline = time.monotonic() + self.server.limits.read_timeout_s
        self.started = 0.0
        self.reader = io.BufferedReader(_DeadlineReader(self), 64 * 1024)
        self.rfile = self.reader
        self.wfile = _Writer(self)

    def finish(self) -> None:
        super().finish()
        self._linger()
        if self.connection is not self.request:  # the TLS socket owns the descriptor now
            with contextlib.suppress(OSError):
                self.connection.close()

    def _linger(self) -> None:
        """Half-close, then discard what the client still sends (bounded in time and bytes)."""
        connection = self.connection
        with contextlib.suppress(OSError):
            socket.socket.shutdown(connection, socket.SHUT_WR)
            deadline, discarded = time.monotonic() + LINGER_S, 0
            while discarded < LINGER_BYTES and (remaining := deadline - time.monotonic()) > 0:
                connection.settimeout(remaining)
                chunk = socket.socket.recv(connection, 65536)  # raw bytes, TLS or not: they are dropped
                if not chunk:
                    break
                discarded += len(chunk)

    def abort(self) -> None:
        """Called by the drain (holding the server's lock) on a connection waiting for a request."""
        with contextlib.suppress(OSError):
            socket.socket.shutdown(self.connection, socket.SHUT_RDWR)

    def handle(self) -> None:
        self.close_connection = True
        tls = self.server.security.tls
        wrapped: ssl.SSLSocket | None = None
        if tls is not None:  # wrapping does no I/O; the handshake below does, bounded by the deadline
            self.connection = wrapped = tls.wrap_socket(self.request, server_side=True,
                                                        do_handshake_on_connect=False)
        if not self.server._enter_idle(self):
            return
        if wrapped is not None and not self._handshake(wrapped):
            self.server._leave_idle(self)
            return
        # The headers and the body go out in separate writes: with Nagle's algorithm on, a
        # keep-alive client's delayed ACK would hold every answer for ~40 ms.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, True)
        self.handle_one_request(entered=True)
        while not self.close_connection:
            self.handle_one_request()

    def _handshake(self, wrapped: ssl.SSLSocket) -> bool:
        try:
            wrapped.settimeout(max(self.deadline - time.monotonic(), 0.001))
            wrapped.do_handshake()
            return True
        except (OSError, ValueError) as exc:
            log.info("extender.tls_refused", client=_client(self.client_address), error=_reason(exc))
            return False

    def handle_one_request(self, entered: bool = False) -> None:
        self.close_connection = True
        limits = self.server.limits
        if not entered:
            if not self.server._enter_idle(self):
                return
            # A kept-alive connection may sit idle up to the idle timeout; the read deadline
            # counts from its next request's first byte.
            self.deadline = time.monotonic() + limits.idle_timeout_s
        self.command = self.request_version = self.requestline = ""
        self.raw_requestline = b""
        try:
            try:
                if not entered:
                    if not self.reader.peek(1):
                        return  # the client closed the idle connection
                    self.deadline = time.monotonic() + limits.read_timeout_s
                self.raw_requestline = self.rfile.readline(65537)
            finally:
                self.server._leave_idle(self)
            self.started = time.perf_counter()
            if not self.raw_requestline:
                return
            if len(self.raw_requestline) > 65536:
                self.send_error(HTTPStatus.REQUEST_URI_TOO_LONG)
                return
            self.close_connection = False
            if not self.parse_request():
                return
            method = getattr(self, f"do_{self.command}", None)
            if method is None:
                self.send_error(HTTPStatus.NOT_IMPLEMENTED, f"method {self.command} is not supported")
                return
            method()
            self.wfile.flush()
        except TimeoutError:
            # Nothing at all is an idle keep-alive connection (or a client that never spoke);
            # a request cut short is worth a line at info.
            (log.info if self.raw_requestline else log.debug)(
                "extender.read_timeout", client=_client(self.client_address),
                read_timeout_s=self.server.limits.read_timeout_s, request=self.requestline[:200])
            self.close_connection = True
        except OSError as exc:  # reset, broken pipe, TLS errors
            log.debug("extender.connection_lost", client=_client(self.client_address), error=repr(exc))
            self.close_connection = True

    # -- answers -----------------------------------------------------------------------

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        log.debug("extender.http", client=_client(self.client_address), message=format % args)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """http.server's own errors (bad request line, too many headers...) as JSON, closing the connection."""
        self.close_connection = True
        try:
            phrase = HTTPStatus(code).phrase
        except ValueError:
            phrase = "error"
        if not self.request_version:
            self.request_version = "HTTP/1.1"
        self._send(code, {"error": message or phrase}, head=self.command == "HEAD")

    def _send(self, status: int, body: Any, headers: dict[str, str] | None = None, head: bool = False) -> None:
        data = json.dumps(body, separators=(",", ":")).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if self.server.draining:
            self.close_connection = True
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if not head:
            self.wfile.write(data)

    def _health(self, head: bool) -> None:
        framed = self.headers.get("Content-Length") or self.headers.get("Transfer-Encoding")
        if framed and self._read_body() is None:
            return
        if self.path.split("?", 1)[0].rstrip("/") in _HEALTH_PATHS:
            self._send(200, {"status": "ok"}, head=head)
        else:
            self._send(404, {"error": f"no such path {self.path[:200]}"}, head=head)

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self._health(head=False)

    def do_HEAD(self) -> None:  # noqa: N802
        self._health(head=True)

    def _read_body(self) -> bytes | None:
        """The request's body; None when its framing is refused (the answer is sent, the connection closes)."""
        lengths = self.headers.get_all("Content-Length") or []
        encodings = self.headers.get_all("Transfer-Encoding") or []
        if lengths and encodings:
            self.close_connection = True
            self._send(400, {"error": "a request may not carry both Content-Length and Transfer-Encoding"})
            return None
        if encodings:
            self.close_connection = True
            self._send(411, {"error": "Transfer-Encoding is not supported: send the body with a Content-Length"})
            return None
        values = {value.strip() for value in lengths}
        if len(values) > 1 or (values and not _DIGITS.fullmatch(next(iter(values)))):
            self.close_connection = True
            self._send(400, {"error": "bad Content-Length: expected one non-negative whole number"})
            return None
        length = int(values.pop()) if values else 0
        if length > self.server.limits.max_body:
            self.close_connection = True
            self._send(413, {"error": f"body of {length} bytes is over the limit of {self.server.limits.max_body}"})
            return None
        body = self.rfile.read(length)
        if len(body) < length:
            self.close_connection = True
            self._send(400, {"error": f"the body ended after {len(body)} of {length} bytes"})
            return None
        return body

    def _authorized(self) -> bool:
        token = self.server.security.token
        if token is None:
            return True
        given = self.headers.get("Authorization", "")
        scheme, _, credential = given.partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(credential.strip().encode("latin-1"), token)

    def do_POST(self) -> None:  # noqa: N802
        verb = self.server.verbs.route(self.path)
        handler = _VERBS.get(verb)
        if handler is not None and not self._authorized():
            self.close_connection = True  # an unauthenticated body is not read
            self._send(401, {"error": "missing or wrong bearer token"}, headers={"WWW-Authenticate": "Bearer"})
            return
        body = self._read_body()
        if body is None:
            return
        if handler is None:
            self._send(404, {"error": f"no such verb {self.path[:200]}; this extender serves "
                                      f"{', '.join(self.server.verbs.paths())} (--filter-verb ...)"})
            return
        try:
            answer, status = handler(self.server.service, _parse(body)), 200
        except protocol.ProtocolError as exc:
            answer, status = {"error": str(exc)}, 400
        except ExtenderCallError as exc:
            answer, status = {"error": str(exc)}, 500
        except Exception as exc:  # a bug of ours: answered, logged, the server stays up
            if isinstance(exc, pykka.ActorDeadError) and self.server.draining:
                # The drain time ran out and the plugins stopped under this request: no bug.
                reason = "the extender stopped before this request finished (its drain time ran out); retry"
                log.warning("extender.stopped_mid_request", verb=verb, reason=reason)
                answer, status = {"error": reason}, 503
            else:
                error_id = secrets.token_hex(6)
                log.error("extender.internal_error", verb=verb, error_id=error_id, exc_info=exc)
                answer, status = {"error": f"internal error (error id {error_id})"}, 500
        self._send(status, answer)
        log.debug("extender.request", verb=verb, status=status,
                  duration_ms=round((time.perf_counter() - self.started) * 1000, 3))


def _parse(body: bytes) -> Any:
    try:
        return protocol.parse_json(body)
    except RecursionError:
        raise protocol.ProtocolError("malformed JSON: nested too deeply") from None


def _decoding(decode: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def checked(body: Any) -> Any:
        try:
            return decode(body)
        except RecursionError:
            raise protocol.ProtocolError("the request is nested too deeply") from None
    return checked


def _filter(service: ExtenderService, body: Any) -> Any:
    return service.filter(_decoding(protocol.ExtenderArgs.decode)(body))


def _prioritize(service: ExtenderService, body: Any) -> Any:
    return service.prioritize(_decoding(protocol.ExtenderArgs.decode)(body))


def _bind(service: ExtenderService, body: Any) -> Any:
    return service.bind(_decoding(protocol.BindingArgs.decode)(body))


def _preempt(service: ExtenderService, body: Any) -> Any:
    return service.preempt(_decoding(protocol.PreemptionArgs.decode)(body))


_VERBS = {"filter": _filter, "prioritize": _prioritize, "bind": _bind, "preempt": _preempt}

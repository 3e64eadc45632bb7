"""The HTTP side of the extender: routes, limits, security, and answers that never take it down.

This module owns serving `ExtenderService` over HTTP/1.1 (or HTTPS) with aiohttp's web
server on one asyncio event loop in a thread of its own: a POST to each verb (`Verbs`,
kube-scheduler's ``filterVerb`` ... under any ``urlPrefix``), GET or HEAD `/healthz`,
`/readyz`, `/livez`, and the GET routes the embedding program adds. It adds to aiohttp
what a client may cost the process (`ServerLimits`), who may call the verbs
(`ServerSecurity`: TLS, client certificates, a bearer token) and the drain on shutdown.
The verbs, which block on guest calls, run on a bounded thread pool. A bad request is a
4xx, a guest failure in prioritize a 500 with the service's message, a bug of ours a
500 with an error id; none stops the server. `docs/reliability.md` ("The extender's
HTTP server", "Threat model of the extender") tells the story.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import os
import re
import resource
import secrets
import socket
import ssl
import stat
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, Protocol

import pykka
from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from wasm_scheduler.adapters.extender import protocol
from wasm_scheduler.adapters.extender.defaults import (
    DEFAULT_BACKLOG,
    DEFAULT_DRAIN_S,
    DEFAULT_IDLE_TIMEOUT_S,
    DEFAULT_MAX_BODY,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_READ_TIMEOUT_S,
    DEFAULT_WORKERS,
)
from wasm_scheduler.adapters.extender.service import ExtenderCallError, ExtenderService
from wasm_scheduler.adapters.framework.cluster import read_regular_file
from wasm_scheduler.adapters.framework.errors import UserError, clip
from wasm_scheduler.logger import get_logger

log = get_logger("adapters.extender.server")

#: Largest --token-file read, in bytes.
MAX_TOKEN_BYTES = 64 * 1024
#: File descriptors kept for everything but connections (guests, the API client, logs) when
#: the connection cap is checked against the process's limit.
FD_HEADROOM = 256

_HEALTH_PATHS = ("/healthz", "/readyz", "/livez")
_REFUSED = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
            b"Retry-After: 1\r\nConnection: close\r\n\r\n%s")
_REFUSED_BODY = b'{"error":"too many connections"}'

#: A GET route the embedding program adds (`/metrics`, a readiness check): called with no
#: argument on a thread (not the event loop, not the verbs' pool), it returns the status,
#: the body and its Content-Type.
ExtraRoute = Callable[[], tuple[int, bytes, str]]
#: Told of each answered request but the GET routes' own (`/metrics`' request timing): the verb
#: ("" for a path that is none), the HTTP status, the seconds from arrival to answer.
RequestObserver = Callable[[str, int, float], None]


@dataclass(frozen=True)
class ServerLimits:
    """What one client, or many, may cost the server; every field has a default that suits kube-scheduler."""

    max_body: int = DEFAULT_MAX_BODY
    read_timeout_s: float = DEFAULT_READ_TIMEOUT_S
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    backlog: int = DEFAULT_BACKLOG
    drain_s: float = DEFAULT_DRAIN_S
    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S
    workers: int = DEFAULT_WORKERS


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


class ExtenderServer:
    """The extender's HTTP server; `start_background()` serves, `stop()` drains and closes.

    The listening socket is bound when the server is made (an OSError when it cannot be);
    connections queue in the kernel until `start_background()`. `extra_routes` maps a path
    (``/metrics``) to a function answering GET and HEAD there, open like the health paths
    (no token); it takes the place of a built-in health path of the same name. `on_request`
    hears every answered request but those GET routes' (the metrics' request timing)."""

    def __init__(self, address: tuple[str, int], service: ExtenderService, max_body: int | None = None,
                 limits: ServerLimits | None = None, security: ServerSecurity | None = None,
                 verbs: Verbs | None = None, extra_routes: Mapping[str, ExtraRoute] | None = None,
                 on_request: RequestObserver | None = None) -> None:
        limits = limits or ServerLimits()
        if max_body is not None:
            limits = replace(limits, max_body=max_body)
        self.limits = limits
        self.security = security or ServerSecurity()
        self.verbs = (verbs or Verbs()).checked()
        self.service = service
        self.extra_routes = {_route_key(path): route for path, route in (extra_routes or {}).items()}
        self.on_request = on_request
        self.max_connections = _connections_within_fd_limit(limits.max_connections)
        self.socket = socket.socket(socket.AF_INET6 if ":" in address[0] else socket.AF_INET, socket.SOCK_STREAM)
        try:
            self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self.socket.bind(address)
            self.socket.listen(max(limits.backlog, 1))
        except BaseException:
            self.socket.close()
            raise
        self.server_address: tuple[Any, ...] = self.socket.getsockname()
        self._pool = ThreadPoolExecutor(max(limits.workers, 1), thread_name_prefix="extender-call")
        self._open: dict[asyncio.BaseTransport, _Connection] = {}
        self._draining = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._listener: asyncio.AbstractServer | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None

    @property
    def max_body(self) -> int:
        return self.limits.max_body

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        scheme = "https" if self.security.tls is not None else "http"
        return f"{scheme}://{f'[{host}]' if ':' in host else host}:{port}"

    @property
    def open_connections(self) -> int:
        return len(self._open)

    # -- running -----------------------------------------------------------------------

    def start_background(self) -> ExtenderServer:
        """Serve on an event loop in a daemon thread; returns once the socket is being served."""
        loop = asyncio.new_event_loop()
        loop.set_exception_handler(_loop_error)
        loop.run_until_complete(self._start(loop))  # before the thread: its errors are raised here
        self._loop = loop
        self._thread = threading.Thread(target=self._run, args=(loop,), name="extender-http", daemon=True)
        self._thread.start()
        return self

    @staticmethod
    def _run(loop: asyncio.AbstractEventLoop) -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_forever()
        finally:
            loop.close()

    async def _start(self, loop: asyncio.AbstractEventLoop) -> None:
        app = web.Application(client_max_size=self.limits.max_body)
        app.router.add_route("*", "/{path:.*}", self._handle)
        # aiohttp's keep-alive timeout closes a connection idle between requests; its lingering
        # close reads (and drops) what a client still sends after an early answer (401, 413).
        self._runner = web.AppRunner(app, handle_signals=False, access_log=None, logger=_LIBRARY_LOG,
                                     keepalive_timeout=self.limits.idle_timeout_s, lingering_time=1.0)
        await self._runner.setup()
        server = self._runner.server
        assert server is not None
        self._listener = await loop.create_server(
            lambda: _Connection(self, server()), sock=self.socket, backlog=max(self.limits.backlog, 1),
            ssl=self.security.tls, ssl_handshake_timeout=self.limits.read_timeout_s if self.security.tls else None)

    # -- connections ---------------------------------------------------------------------

    def _admit(self, connection: _Connection, transport: asyncio.Transport) -> bool:
        """A connection made (after its TLS handshake): served, or answered 503 and closed."""
        if not self._draining and len(self._open) < self.max_connections:
            self._open[transport] = connection
            return True
        log.warning("extender.connection_refused", client=connection.client,
                    reason="draining" if self._draining else "max_connections", max_connections=self.max_connections)
        transport.write(_REFUSED % (len(_REFUSED_BODY), _REFUSED_BODY))
        transport.close()
        return False

    def _release(self, transport: asyncio.BaseTransport) -> None:
        self._open.pop(transport, None)

    # -- requests ------------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        connection = self._open.get(request.transport) if request.transport is not None else None
        if connection is not None:
            connection.request_started()
        started = time.perf_counter()
        verb = ""
        try:
            verb, response = await self._respond(request, connection)
        except Exception as exc:  # a bug of ours: answered, logged, the server stays up
            error_id = secrets.token_hex(6)
            log.error("extender.internal_error", verb=verb, error_id=error_id, exc_info=exc)
            response = _json(500, {"error": f"internal error (error id {error_id})"})
        finally:
            if connection is not None:
                connection.request_ended()
        if self._draining or (connection is not None and connection.eof):
            response.force_close()
        if verb:
            log.debug("extender.request", verb=verb, status=response.status,
                      duration_ms=round((time.perf_counter() - started) * 1000, 3))
        if self.on_request is not None and (request.method not in ("GET", "HEAD") or response.status == 404):
            self.on_request(verb, response.status, time.perf_counter() - started)
        return response

    async def _respond(self, request: web.Request, connection: _Connection | None) -> tuple[str, web.StreamResponse]:
        method = request.method
        if method in ("GET", "HEAD"):
            body = await self._body(request, connection)
            if isinstance(body, web.StreamResponse):
                return "", body
            return "", await self._get(request.path)
        if method != "POST":
            return "", _json(405, {"error": f"method {clip(method)} is not supported"}, {"Allow": "GET, HEAD, POST"})
        verb = self.verbs.route(request.path)
        if verb and not self._authorized(request):
            response = _json(401, {"error": "missing or wrong bearer token"}, {"WWW-Authenticate": "Bearer"})
            response.force_close()  # an unauthenticated body is not read
            return verb, response
        body = await self._body(request, connection)
        if isinstance(body, web.StreamResponse):
            return verb, body
        if not verb:
            return verb, _json(404, {"error": f"no such verb {clip(request.path, 200)}; this extender serves "
                                              f"{', '.join(self.verbs.paths())} (--filter-verb ...)"})
        try:
            data = await asyncio.get_running_loop().run_in_executor(self._pool, self._call, verb, body)
            return verb, web.Response(body=data, content_type="application/json")
        except protocol.ProtocolError as exc:
            return verb, _json(400, {"error": str(exc)})
        except ExtenderCallError as exc:
            return verb, _json(500, {"error": str(exc)})
        except pykka.ActorDeadError:
            if not self._draining:
                raise
            # The drain time ran out and the plugins stopped under this request: no bug.
            reason = "the extender stopped before this request finished (its drain time ran out); retry"
            log.warning("extender.stopped_mid_request", verb=verb, reason=reason)
            return verb, _json(503, {"error": reason})

    def _call(self, verb: str, body: bytes) -> bytes:
        """On a thread of the pool: decode, run the verb, encode its answer (a whole node
        that came as bytes goes back as those bytes)."""
        answer = _VERBS[verb](self.service, body)
        return protocol.ANSWER_ENCODER.encode(answer)

    async def _get(self, path: str) -> web.StreamResponse:
        key = _route_key(path)
        route = self.extra_routes.get(key)
        if route is not None:
            status, data, content_type = await asyncio.get_running_loop().run_in_executor(None, route)
            return web.Response(status=status, body=data, headers={"Content-Type": content_type})
        if key in _HEALTH_PATHS:
            return _json(200, {"status": "ok"})
        return _json(404, {"error": f"no such path {clip(path, 200)}"})

    async def _body(self, request: web.Request, connection: _Connection | None) -> bytes | web.StreamResponse:
        """The request's whole body, or the answer that refuses it (413); the read deadline bounds the wait."""
        limit = self.limits.max_body
        if request.content_length is not None and request.content_length > limit:
            response = _json(413, {"error": f"body of {request.content_length} bytes is over the limit of {limit}"})
            response.force_close()
            return response
        try:
            body = await request.read() if request.body_exists else b""
        except web.HTTPRequestEntityTooLarge:  # a chunked body that grew past the limit
            response = _json(413, {"error": f"the body is over the limit of {limit} bytes"})
            response.force_close()
            return response
        except (ConnectionError, asyncio.CancelledError) as exc:
            # The read deadline closed the connection, or the client went away: nobody to answer.
            log.debug("extender.connection_lost", client=connection.client if connection else "", error=repr(exc))
            response = _json(400, {"error": "the connection closed before the body arrived"})
            response.force_close()
            return response
        if connection is not None:
            connection.request_read()
        return body

    def _authorized(self, request: web.Request) -> bool:
        token = self.security.token
        if token is None:
            return True
        scheme, _, credential = request.headers.get("Authorization", "").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(credential.strip().encode("latin-1"), token)

    # -- shutdown ------------------------------------------------------------------------

    def drain(self, timeout_s: float | None = None, hurry: Flag | None = None) -> int:
        """Stop accepting, close idle connections, and wait up to `timeout_s` (the limits' drain time by
        default; cut short when `hurry` is set) for requests in flight. Returns the connections still open."""
        timeout_s = self.limits.drain_s if timeout_s is None else timeout_s
        loop = self._loop
        if loop is None or not loop.is_running():
            self._draining = True
            return 0
        return asyncio.run_coroutine_threadsafe(self._drain(timeout_s, hurry), loop).result()

    async def _drain(self, timeout_s: float, hurry: Flag | None) -> int:
        first = not self._draining
        self._draining = True
        if first and self._listener is not None:
            self._listener.close()  # new connections are refused from here on
        for connection in list(self._open.values()):
            connection.close_if_idle()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(timeout_s, 0.0)
        if first and self._open:
            log.info("extender.draining", connections=len(self._open), drain_s=timeout_s)
        while self._open and loop.time() < deadline and not (hurry is not None and hurry.is_set()):
            await asyncio.sleep(min(0.05, max(deadline - loop.time(), 0.0)))
        left = len(self._open)
        if left:
            log.warning("extender.drain_incomplete", connections=left, drain_s=timeout_s)
        return left

    def stop(self, drain_s: float | None = None, hurry: Flag | None = None) -> None:
        """Drain (see `drain`), then close. Requests that outlast the drain keep their connection
        until they are answered; then the event loop ends."""
        self.drain(drain_s, hurry)
        loop = self._loop
        if loop is not None and loop.is_running():
            asyncio.run_coroutine_threadsafe(self._close_when_answered(), loop)
        else:
            self.server_close()
        self._pool.shutdown(wait=False)

    async def _close_when_answered(self) -> None:
        while self._open:
            await asyncio.sleep(0.05)
        if self._runner is not None:
            await self._runner.cleanup()
        asyncio.get_running_loop().stop()

    def server_close(self) -> None:
        """Close the listening socket of a server never started."""
        self.socket.close()
        self._pool.shutdown(wait=False)


def _route_key(path: str) -> str:
    return path.split("?", 1)[0].rstrip("/") or "/"


def _json(status: int, body: Any, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(status=status, body=json.dumps(body, separators=(",", ":")).encode(),
                        content_type="application/json", headers=headers)


def _client(address: Any) -> str:
    if isinstance(address, tuple) and len(address) >= 2:
        return f"{address[0]}:{address[1]}"
    return str(address)


def _connections_within_fd_limit(wanted: int) -> int:
    """`wanted`, after raising the process's soft limit of open files toward its hard limit so that
    many connections fit; less (with a warning) when the hard limit is too low for them. A connection
    beyond the limit would fail the accept itself, for every client, not just be refused."""
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        needed = wanted + FD_HEADROOM
        if soft != resource.RLIM_INFINITY and soft < needed:
            raised = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
            resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
            soft = raised
    except (OSError, ValueError):
        return wanted
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return wanted
    fitting = max(soft - FD_HEADROOM, 1)
    log.warning("extender.fd_limit", max_connections=wanted, served=fitting, open_files=soft,
                reason="the process may not open enough files for --max-connections: fewer are served at once")
    return fitting


class _Connection(asyncio.Protocol):
    """One client connection: aiohttp's protocol (`handler`), wrapped with the connection cap and the
    read deadline (a request must arrive whole within the read timeout of its first byte, or of the
    connect for a first request). Between requests, aiohttp's keep-alive timeout applies.

    States: "idle" (between requests), "reading" (a request is arriving), "answering" (it is in;
    its answer is not written yet). After an answer, the same timer checks that the client read it:
    an answer still unwritten a read timeout later is dropped with the connection."""

    def __init__(self, server: ExtenderServer, handler: asyncio.Protocol) -> None:
        self.server = server
        self.handler: Any = handler  # aiohttp's RequestHandler
        self.transport: asyncio.Transport | None = None
        self.client = ""
        self.state = "reading"
        self.spoke = False  # a byte of the current request has arrived
        self.eof = False
        self._timer: asyncio.TimerHandle | None = None
        self._served = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.client = _client(transport.get_extra_info("peername"))
        if not self.server._admit(self, transport):
            return
        self._served = True
        self._arm()
        self.handler.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if not self._served:
            return
        if self.state == "idle":
            self.state = "reading"
            self._arm()
        if not self.spoke:
            self.spoke = True
            self.handler.keep_alive(True)  # stops aiohttp's idle timer: the read deadline bounds this request
        self.handler.data_received(data)

    def eof_received(self) -> bool | None:
        """The client shut its side (a half-close): a request begun may still be whole (its answer is
        written, then the connection closes; the read deadline bounds one that is not); an idle
        connection is closed."""
        if not self._served:
            return None
        self.handler.eof_received()
        self.eof = True
        return self.spoke or self.state == "answering" or None

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel()
        if self._served:
            self.server._release(self.transport)  # type: ignore[arg-type]
            self.handler.connection_lost(exc)

    def pause_writing(self) -> None:
        self.handler.pause_writing()

    def resume_writing(self) -> None:
        self.handler.resume_writing()

    # -- called by the request handler ------------------------------------------------------

    def request_started(self) -> None:
        self.spoke = True
        if self.state != "reading":  # a request read while the last one was answered (pipelined)
            self.state = "reading"
            self._arm()

    def request_read(self) -> None:
        self.state = "answering"
        self._cancel()

    def request_ended(self) -> None:
        self.state, self.spoke = "idle", False
        self._arm()  # now the check that the answer is read

    def close_if_idle(self) -> None:
        """Called by the drain: a connection waiting for a request is closed at once."""
        if not self.spoke and self.state != "answering" and self.transport is not None:
            self.transport.close()

    # -- the deadline -------------------------------------------------------------------------

    def _arm(self) -> None:
        self._cancel()
        self._timer = asyncio.get_running_loop().call_later(self.server.limits.read_timeout_s, self._expired)

    def _cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expired(self) -> None:
        self._timer = None
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        unwritten = transport.get_write_buffer_size()
        if self.state == "reading":
            # Nothing at all is a client that never spoke; a request cut short is worth a line at info.
            (log.info if self.spoke else log.debug)("extender.read_timeout", client=self.client,
                                                    read_timeout_s=self.server.limits.read_timeout_s)
        elif self.state == "idle" and unwritten:
            log.info("extender.write_timeout", client=self.client, unwritten=unwritten,
                     read_timeout_s=self.server.limits.read_timeout_s)
        else:
            return
        if unwritten:
            transport.abort()  # close() would wait for a client that does not read
        else:
            transport.close()


class _LibraryLog(logging.Handler):
    """aiohttp's own log lines as structlog events: a client's malformed request or reset at debug
    (`extender.http`), anything else with a traceback as a bug (`extender.connection_failed`)."""

    def emit(self, record: logging.LogRecord) -> None:
        exc = record.exc_info[1] if record.exc_info else None
        message = record.getMessage()[:500]
        if exc is None or isinstance(exc, (HttpProcessingError, ConnectionError, asyncio.CancelledError)):
            log.debug("extender.http", message=message, error=repr(exc) if exc else "")
        else:
            log.error("extender.connection_failed", message=message, error_id=secrets.token_hex(6), exc_info=exc)


_LIBRARY_LOG = logging.getLogger("wasm_scheduler.adapters.extender.aiohttp")
_LIBRARY_LOG.propagate = False
_LIBRARY_LOG.setLevel(logging.DEBUG)
_LIBRARY_LOG.addHandler(_LibraryLog())


def _loop_error(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """The event loop's own errors (an accept that failed for want of file descriptors, ...) as a log line."""
    exc = context.get("exception")
    log.warning("extender.loop_error", message=str(context.get("message", ""))[:500],
                error=repr(exc) if exc is not None else "")


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


def _filter(service: ExtenderService, body: bytes) -> Any:
    return service.filter(_decoding(protocol.ExtenderArgs.from_json)(body))


def _prioritize(service: ExtenderService, body: bytes) -> Any:
    return service.prioritize(_decoding(protocol.ExtenderArgs.from_json)(body))


def _bind(service: ExtenderService, body: bytes) -> Any:
    return service.bind(_decoding(protocol.BindingArgs.decode)(_parse(body)))


def _preempt(service: ExtenderService, body: bytes) -> Any:
    return service.preempt(_decoding(protocol.PreemptionArgs.decode)(_parse(body)))


_VERBS = {"filter": _filter, "prioritize": _prioritize, "bind": _bind, "preempt": _preempt}

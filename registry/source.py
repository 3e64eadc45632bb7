"""Fetching a guest's bytes from where its `guestURL` says.

This module owns reading a guest: a filesystem path (relative ones against the
configuration's directory), a `file://` URL, or an `http(s)://` URL with one overall
deadline, a size cap and a bounded number of redirects. Only regular files are read.
Every failure is a `GuestLoadError` naming the URL (or path) and the problem.

`file://` follows the reference host: everything after `file://` is the path, as is
(`file:///abs/x.wasm` is `/abs/x.wasm`, `file://./x.wasm` and `file://dir/x.wasm` are
relative), and a relative one is read against the configuration's directory.

See `docs/abi-notes.md` ("Where a guest comes from (`guestURL`)").
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import os
import socket
import ssl
import stat
import threading
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from wasm_scheduler.registry.errors import GuestLoadError

#: Largest guest accepted, in bytes.
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
#: Seconds an HTTP(S) fetch may take in all: connect, headers, redirects and body.
DEFAULT_TIMEOUT = 10.0
MAX_REDIRECTS = 5

_FILE_PREFIX = "file://"
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_CHUNK = 64 * 1024

#: What a non-regular file is, for the error message.
_KINDS = (
    (stat.S_ISDIR, "is a directory, not a .wasm file"),
    (stat.S_ISFIFO, "is a FIFO (named pipe), not a regular file"),
    (stat.S_ISSOCK, "is a socket, not a regular file"),
    (stat.S_ISCHR, "is a character device, not a regular file"),
    (stat.S_ISBLK, "is a block device, not a regular file"),
)


@dataclass(frozen=True)
class GuestSource:
    """Where guest bytes come from and the limits on fetching them."""

    url: str
    base_dir: str = ""
    max_bytes: int = DEFAULT_MAX_BYTES
    timeout: float = DEFAULT_TIMEOUT

    def read(self, expected_sha256: str = "") -> bytes:
        data = self._read()
        if not data:
            raise GuestLoadError(self.url, "the guest is empty (0 bytes)")
        if expected_sha256:
            actual = hashlib.sha256(data).hexdigest()
            if actual != expected_sha256.lower():
                raise GuestLoadError(
                    self.url, f"guestSHA256 mismatch: expected {expected_sha256}, got {actual}"
                )
        return data

    def _read(self) -> bytes:
        if self.url[: len(_FILE_PREFIX)].lower() == _FILE_PREFIX:
            return self._read_path(self._file_url_path())
        parsed = urllib.parse.urlsplit(self.url)
        if parsed.scheme in ("http", "https"):
            return _HttpFetch(self.url, self.max_bytes, self.timeout).run()
        if parsed.scheme and len(parsed.scheme) > 1:
            raise GuestLoadError(
                self.url, f"unsupported URL scheme {parsed.scheme!r} (use a path, file:// or http(s)://)"
            )
        return self._read_path(self._resolve(Path(self.url).expanduser()))

    def _resolve(self, path: Path) -> Path:
        if not path.is_absolute() and self.base_dir:
            return Path(self.base_dir) / path
        return path

    def _file_url_path(self) -> Path:
        """The path of a `file://` URL: the text after `file://`, as the reference host
        takes it (no host part, no decoding). A URL written with percent escapes (as
        `Path.as_uri()` makes them) is decoded when the text as is names nothing."""
        rest = self.url[len(_FILE_PREFIX):]
        if not rest:
            raise GuestLoadError(self.url, "file:// URL without a path")
        path = self._resolve(Path(rest))
        if "%" in rest and not os.path.lexists(path):
            decoded = self._resolve(Path(urllib.parse.unquote(rest)))
            if os.path.lexists(decoded):
                return decoded
        return path

    def _read_path(self, path: Path) -> bytes:
        """A regular file's bytes, at most `max_bytes`. Anything else (a directory, a
        FIFO, a device, a socket) is refused before it is read; the file is opened
        non-blocking, so a FIFO swapped in after the check cannot hang the read."""
        try:
            kind = _kind(os.stat(path).st_mode)
            if kind:
                raise GuestLoadError(str(path), kind)
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            raise GuestLoadError(str(path), "no such file") from None
        except OSError as exc:
            raise GuestLoadError(str(path), f"cannot read: {exc.strerror or exc}") from None
        try:
            info = os.fstat(fd)
            kind = _kind(info.st_mode)
            if kind:
                raise GuestLoadError(str(path), kind)
            if info.st_size > self.max_bytes:
                raise GuestLoadError(str(path), f"{info.st_size} bytes is over the limit of {self.max_bytes}")
            chunks: list[bytes] = []
            total = 0
            while total <= self.max_bytes:
                chunk = os.read(fd, min(_CHUNK * 16, self.max_bytes + 1 - total))
                if not chunk:
                    break
                chunks.append(chunk)
                total += len(chunk)
            if total > self.max_bytes:
                raise GuestLoadError(str(path), f"over the limit of {self.max_bytes} bytes")
            return b"".join(chunks)
        except OSError as exc:
            raise GuestLoadError(str(path), f"cannot read: {exc.strerror or exc}") from None
        finally:
            os.close(fd)


def _kind(mode: int) -> str:
    """Why a file of this mode is not read ("" for a regular file)."""
    if stat.S_ISREG(mode):
        return ""
    for test, problem in _KINDS:
        if test(mode):
            return problem
    return "is not a regular file"


class _Timeout(Exception):
    """The fetch's overall deadline passed."""


class _HttpFetch:
    """One HTTP(S) fetch with a single deadline over every connect, header, redirect
    and body read: each socket operation is bounded by the time left, and a timer shuts
    the connection down at the deadline, so a server that trickles bytes cannot stretch
    the fetch (a per-operation timeout never ends against one byte a second)."""

    def __init__(self, url: str, max_bytes: int, timeout: float) -> None:
        self.url = url
        self.max_bytes = max_bytes
        self.timeout = timeout
        self.deadline = time.monotonic() + timeout
        self.expired = threading.Event()
        self.last_status = 0

    def run(self) -> bytes:
        url = self.url
        try:
            for _hop in range(MAX_REDIRECTS + 1):
                location = self._get(url)
                if isinstance(location, bytes):
                    return location
                url = location
            raise GuestLoadError(self.url, f"HTTP {self.last_status} too many redirects (more than {MAX_REDIRECTS})")
        except GuestLoadError:
            raise
        except (_Timeout, TimeoutError):
            raise GuestLoadError(self.url, f"timed out after {self.timeout:g}s") from None
        except (OSError, http.client.HTTPException) as exc:
            if self._late():
                raise GuestLoadError(self.url, f"timed out after {self.timeout:g}s") from None
            raise GuestLoadError(self.url, f"cannot fetch: {_describe(exc)}") from None

    def _late(self) -> bool:
        return self.expired.is_set() or time.monotonic() >= self.deadline

    def _left(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0 or self.expired.is_set():
            raise _Timeout()
        return left

    def _get(self, url: str) -> bytes | str:
        """The body of `url`, or the URL it redirects to."""
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise GuestLoadError(self.url, f"cannot fetch: redirected to an unsupported URL {url!r}")
        conn, target = self._connection(parts)
        timer: threading.Timer | None = None
        try:
            conn.connect()
            timer = threading.Timer(self._left(), self._cut, args=(conn.sock,))
            timer.daemon = True
            timer.start()
            conn.sock.settimeout(self._left())
            conn.request("GET", target, headers={"User-Agent": "wasm-scheduler"})
            conn.sock.settimeout(self._left())
            response = conn.getresponse()
            self._left()
            self.last_status = response.status
            if response.status in _REDIRECTS:
                location = response.getheader("Location")
                if not location:
                    raise GuestLoadError(self.url, f"HTTP {response.status} redirect without a Location")
                return urllib.parse.urljoin(url, location)
            if response.status != 200:
                reason = str(response.reason).strip().splitlines()[0] if str(response.reason).strip() else ""
                raise GuestLoadError(self.url, f"HTTP {response.status} {reason}".strip())
            declared = response.getheader("Content-Length")
            if declared and declared.isdigit() and int(declared) > self.max_bytes:
                raise GuestLoadError(
                    self.url, f"Content-Length {declared} is over the limit of {self.max_bytes} bytes"
                )
            return self._body(conn, response)
        finally:
            if timer is not None:
                timer.cancel()
            conn.close()

    def _connection(self, parts: urllib.parse.SplitResult) -> tuple[http.client.HTTPConnection, str]:
        """A connection for `parts` (through the proxy the environment names, if any)
        and the request target to send on it."""
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        proxy = urllib.request.getproxies().get(parts.scheme)
        if proxy and urllib.request.proxy_bypass(parts.netloc):
            proxy = None
        host, port = parts.hostname or "", parts.port
        if proxy:
            via = urllib.parse.urlsplit(proxy if "://" in proxy else f"http://{proxy}")
            host, port = via.hostname or "", via.port
        conn: http.client.HTTPConnection
        if parts.scheme == "https":
            conn = http.client.HTTPSConnection(
                host, port, timeout=self._left(), context=ssl.create_default_context()
            )
            if proxy:
                conn.set_tunnel(parts.hostname or "", parts.port)
        else:
            conn = http.client.HTTPConnection(host, port, timeout=self._left())
            if proxy:
                path = urllib.parse.urlunsplit(parts._replace(fragment=""))
        return conn, path

    def _body(self, conn: http.client.HTTPConnection, response: http.client.HTTPResponse) -> bytes:
        chunks: list[bytes] = []
        total = 0
        while total <= self.max_bytes:
            if conn.sock is not None:
                conn.sock.settimeout(self._left())
            chunk = response.read1(min(_CHUNK, self.max_bytes + 1 - total))
            self._left()  # a read cut short by the deadline is a timeout, not the end
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > self.max_bytes:
            raise GuestLoadError(self.url, f"body is over the limit of {self.max_bytes} bytes")
        if response.length:  # the connection ended before Content-Length bytes came
            raise GuestLoadError(self.url, f"the body ended {response.length} bytes short of its Content-Length")
        return b"".join(chunks)

    def _cut(self, sock: socket.socket | None) -> None:
        """At the deadline: wake whatever read is blocked on the connection."""
        self.expired.set()
        if sock is None:
            return
        with contextlib.suppress(OSError):  # already closed
            socket.socket.shutdown(sock, socket.SHUT_RDWR)  # the raw socket, also under TLS


def _describe(exc: BaseException) -> str:
    """One line for a network error."""
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__

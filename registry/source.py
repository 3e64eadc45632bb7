"""Fetching a guest's bytes from where its `guestURL` says.

This module owns reading a guest: a filesystem path (relative ones against the
configuration's directory), a `file://` URL, or an `http(s)://` URL with a timeout, a
size cap and a bounded number of redirects. Every failure is a `GuestLoadError` naming
the URL and the problem.
"""

from __future__ import annotations

import hashlib
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from registry.errors import GuestLoadError

#: Largest guest accepted, in bytes.
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
#: Seconds an HTTP(S) fetch may take to connect and between reads.
DEFAULT_TIMEOUT = 10.0
MAX_REDIRECTS = 5


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
        parsed = urllib.parse.urlparse(self.url)
        if parsed.scheme in ("http", "https"):
            return self._read_http()
        if parsed.scheme == "file":
            return self._read_path(Path(urllib.request.url2pathname(parsed.path)))
        if parsed.scheme and len(parsed.scheme) > 1:
            raise GuestLoadError(
                self.url, f"unsupported URL scheme {parsed.scheme!r} (use a path, file:// or http(s)://)"
            )
        path = Path(self.url).expanduser()
        if not path.is_absolute() and self.base_dir:
            path = Path(self.base_dir) / path
        return self._read_path(path)

    def _read_path(self, path: Path) -> bytes:
        try:
            size = path.stat().st_size
            if size > self.max_bytes:
                raise GuestLoadError(str(path), f"{size} bytes is over the limit of {self.max_bytes}")
            return path.read_bytes()
        except FileNotFoundError:
            raise GuestLoadError(str(path), "no such file") from None
        except IsADirectoryError:
            raise GuestLoadError(str(path), "is a directory, not a .wasm file") from None
        except OSError as exc:
            raise GuestLoadError(str(path), f"cannot read: {exc.strerror or exc}") from None

    def _read_http(self) -> bytes:
        opener = urllib.request.build_opener(_BoundedRedirects())
        request = urllib.request.Request(self.url, headers={"User-Agent": "wasm-scheduler"})
        try:
            with opener.open(request, timeout=self.timeout) as response:
                declared = response.headers.get("Content-Length")
                if declared and declared.isdigit() and int(declared) > self.max_bytes:
                    raise GuestLoadError(
                        self.url, f"Content-Length {declared} is over the limit of {self.max_bytes} bytes"
                    )
                data = response.read(self.max_bytes + 1)
        except GuestLoadError:
            raise
        except urllib.error.HTTPError as exc:
            reason = str(exc.reason).strip().splitlines()[0] if str(exc.reason).strip() else ""
            raise GuestLoadError(self.url, f"HTTP {exc.code} {reason}".strip()) from None
        except urllib.error.URLError as exc:
            raise GuestLoadError(self.url, f"cannot fetch: {exc.reason}") from None
        except TimeoutError:
            raise GuestLoadError(self.url, f"timed out after {self.timeout:g}s") from None
        except OSError as exc:
            raise GuestLoadError(self.url, f"cannot fetch: {exc}") from None
        if len(data) > self.max_bytes:
            raise GuestLoadError(self.url, f"body is over the limit of {self.max_bytes} bytes")
        return data


class _BoundedRedirects(urllib.request.HTTPRedirectHandler):
    max_redirections = MAX_REDIRECTS

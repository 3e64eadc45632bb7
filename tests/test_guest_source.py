"""Fetching guest bytes: `file://` URLs as the reference host reads them, only regular
files, and one overall deadline for an HTTP(S) fetch against a server that trickles."""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import GUESTS
from wasm_scheduler.registry.config import PluginConfig
from wasm_scheduler.registry.errors import GuestLoadError
from wasm_scheduler.registry.source import GuestSource

PROBE_BYTES = (GUESTS / "probe.wat").read_bytes()


def one_line(excinfo: pytest.ExceptionInfo[GuestLoadError]) -> str:
    message = str(excinfo.value)
    assert "\n" not in message
    return message


# --- file:// URLs ----------------------------------------------------------------------

@pytest.fixture
def config_dir(tmp_path: Path) -> Path:
    """A configuration folder with wasm/main.wasm and path/to/x.wasm under it, and
    x.wasm beside it (for ../)."""
    base = tmp_path / "conf"
    (base / "wasm").mkdir(parents=True)
    (base / "path" / "to").mkdir(parents=True)
    (base / "wasm" / "main.wasm").write_bytes(PROBE_BYTES)
    (base / "path" / "to" / "x.wasm").write_bytes(PROBE_BYTES + b" ;; x")
    (tmp_path / "x.wasm").write_bytes(PROBE_BYTES + b" ;; parent")
    return base


@pytest.mark.parametrize(("url", "suffix"), [
    ("file://./wasm/main.wasm", b""),
    ("file://wasm/main.wasm", b""),
    ("file://path/to/x.wasm", b" ;; x"),
    ("file://../x.wasm", b" ;; parent"),
    ("file://./path/../wasm/main.wasm", b""),
])
def test_relative_file_url_is_read_against_the_config_folder(url: str, suffix: bytes, config_dir: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir("/")  # the working directory plays no part
    assert GuestSource(url, base_dir=str(config_dir)).read() == PROBE_BYTES + suffix


def test_relative_file_url_through_the_plugin_config(config_dir: Path) -> None:
    config = PluginConfig.from_args("rel", {"guestURL": "file://./wasm/main.wasm"}, base_dir=str(config_dir))
    assert GuestSource(config.guest_url, config.base_dir).read() == PROBE_BYTES


def test_absolute_file_url_ignores_the_config_folder(config_dir: Path, tmp_path: Path) -> None:
    url = f"file://{tmp_path}/x.wasm"  # file:///tmp/... : the path after file:// is absolute
    assert url.startswith("file:///")
    assert GuestSource(url, base_dir=str(config_dir / "wasm")).read() == PROBE_BYTES + b" ;; parent"


def test_the_first_segment_of_a_file_url_is_not_a_host_name(config_dir: Path) -> None:
    """`file://wasm/main.wasm` was read as host `wasm`, path `/main.wasm`."""
    (config_dir / "main.wasm").write_bytes(b"wrong file")
    assert GuestSource("file://wasm/main.wasm", base_dir=str(config_dir)).read() == PROBE_BYTES


def test_missing_relative_file_url_names_the_resolved_path(config_dir: Path) -> None:
    with pytest.raises(GuestLoadError) as excinfo:
        GuestSource("file://./wasm/gone.wasm", base_dir=str(config_dir)).read()
    assert one_line(excinfo) == f"wasm guest {config_dir / 'wasm' / 'gone.wasm'}: no such file"


def test_file_url_without_a_path() -> None:
    with pytest.raises(GuestLoadError) as excinfo:
        GuestSource("file://").read()
    assert one_line(excinfo) == "wasm guest file://: file:// URL without a path"


def test_percent_escapes_are_taken_as_is_when_that_file_exists(tmp_path: Path) -> None:
    (tmp_path / "a%20b.wasm").write_bytes(PROBE_BYTES)
    (tmp_path / "a b.wasm").write_bytes(b"the decoded name")
    assert GuestSource(f"file://{tmp_path}/a%20b.wasm").read() == PROBE_BYTES


# --- only regular files ----------------------------------------------------------------

def test_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "guest.wasm"
    os.mkfifo(fifo)
    with pytest.raises(GuestLoadError) as excinfo:
        GuestSource(str(fifo)).read()  # no writer: opening it for reading would block
    assert one_line(excinfo) == f"wasm guest {fifo}: is a FIFO (named pipe), not a regular file"


def test_fifo_through_a_file_url(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.wasm")
    with pytest.raises(GuestLoadError) as excinfo:
        GuestSource("file://pipe.wasm", base_dir=str(tmp_path)).read()
    assert "is a FIFO" in one_line(excinfo)


def test_dev_zero_is_refused() -> None:
    with pytest.raises(GuestLoadError) as excinfo:
        GuestSource("/dev/zero", max_bytes=1024).read()
    assert one_line(excinfo) == "wasm guest /dev/zero: is a character device, not a regular file"


def test_symlink_to_dev_zero_is_refused(tmp_path: Path) -> None:
    link = tmp_path / "zero.wasm"
    link.symlink_to("/dev/zero")
    with pytest.raises(GuestLoadError) as excinfo:
        GuestSource(str(link)).read()
    assert one_line(excinfo) == f"wasm guest {link}: is a character device, not a regular file"


def test_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(GuestLoadError) as excinfo:
        GuestSource("file://.", base_dir=str(tmp_path)).read()
    assert one_line(excinfo) == f"wasm guest {tmp_path / '.'}: is a directory, not a .wasm file"


def test_socket_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.wasm"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(str(path))
        with pytest.raises(GuestLoadError) as excinfo:
            GuestSource(str(path)).read()
        assert one_line(excinfo) == f"wasm guest {path}: is a socket, not a regular file"
    finally:
        listener.close()


def test_symlink_to_a_regular_file_is_read(tmp_path: Path) -> None:
    (tmp_path / "real.wasm").write_bytes(PROBE_BYTES)
    (tmp_path / "link.wasm").symlink_to(tmp_path / "real.wasm")
    assert GuestSource("file://link.wasm", base_dir=str(tmp_path)).read() == PROBE_BYTES


def test_regular_file_at_the_size_cap_is_read(tmp_path: Path) -> None:
    target = tmp_path / "exact.wasm"
    target.write_bytes(b"a" * 1000)
    assert GuestSource(str(target), max_bytes=1000).read() == b"a" * 1000
    with pytest.raises(GuestLoadError) as excinfo:
        GuestSource(str(target), max_bytes=999).read()
    assert one_line(excinfo) == f"wasm guest {target}: 1000 bytes is over the limit of 999"


# --- one deadline for an HTTP fetch ---------------------------------------------------

#: The trickling server sends one byte per TICK seconds, and stops by itself after
#: LIMIT bytes even if the client is still there.
TICK = 0.05
LIMIT = 200


class TricklingServer:
    """A server on 127.0.0.1 that answers every connection one byte at a time: in the
    headers (`headers`) or in a body announced with a large Content-Length (`body`)."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(4)
        self.listener.settimeout(0.1)
        self.stop = threading.Event()
        self.sent = 0
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.listener.getsockname()[1]}/guest.wasm"

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _addr = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with conn:
                self._trickle(conn)

    def _trickle(self, conn: socket.socket) -> None:
        conn.settimeout(1)
        try:
            conn.recv(4096)  # the request
            if self.where == "headers":
                payload = b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * LIMIT
            else:
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
                payload = b"(" * LIMIT
            for byte in payload:
                if self.stop.is_set():
                    return
                conn.sendall(bytes([byte]))
                self.sent += 1
                time.sleep(TICK)
        except OSError:
            return  # the client hung up

    def close(self) -> None:
        self.stop.set()
        self.listener.close()
        self.thread.join(timeout=5)


@pytest.fixture(params=["headers", "body"])
def trickling(request: pytest.FixtureRequest) -> Iterator[TricklingServer]:
    server = TricklingServer(request.param)
    try:
        yield server
    finally:
        server.close()


def test_a_trickling_server_hits_the_overall_deadline(trickling: TricklingServer) -> None:
    """Each byte comes well within the timeout, so only an overall deadline ends it."""
    with pytest.raises(GuestLoadError) as excinfo:
        GuestSource(trickling.url, timeout=0.5).read()
    assert one_line(excinfo) == f"wasm guest {trickling.url}: timed out after 0.5s"
    assert 0 < trickling.sent < LIMIT  # it was cut short, not run to the server's own end

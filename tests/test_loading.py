"""Loading a guest: fetching its bytes, checking them, compiling once, validating the ABI.

Every failure is a `GuestLoadError` (or a `PluginConfigError` for the config) whose
one-line message names the guest and the problem.
"""

from __future__ import annotations

import hashlib
import http.server
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import GUESTS, wat_guest
from tests.probe import Script
from wasm_scheduler.actors.guest_instance import GuestInstance
from wasm_scheduler.framework_api import Code, Status
from wasm_scheduler.registry.compiler import GuestCompiler
from wasm_scheduler.registry.config import PluginConfig, PluginConfigError
from wasm_scheduler.registry.errors import GuestLoadError
from wasm_scheduler.registry.source import MAX_REDIRECTS, GuestSource
from wasm_scheduler.vocabulary import EmptyHandle

PROBE = GUESTS / "probe.wat"
PROBE_BYTES = PROBE.read_bytes()
PROBE_SHA = hashlib.sha256(PROBE_BYTES).hexdigest()

MINIMAL = b'(module (memory (export "memory") 1) (func (export "filter") (result i32) (i32.const 2)))'


@pytest.fixture
def fresh() -> Iterator[GuestCompiler]:
    """A compiler of its own, so what it compiled before is known."""
    with GuestCompiler() as compiler:
        yield compiler


def load_error(excinfo: pytest.ExceptionInfo[GuestLoadError]) -> str:
    message = str(excinfo.value)
    assert "\n" not in message, f"a GuestLoadError is one line: {message!r}"
    return message


# --- a local HTTP server ------------------------------------------------------------------

BIG = 2000
CAP = 1000


class _Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass

    def _send(self, body: bytes, length: bool = True) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/wasm")
        if length:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        path = self.path
        if path == "/probe.wat":
            self._send(PROBE_BYTES)
        elif path == "/big":
            self._send(b"(" * BIG)
        elif path == "/big-unannounced":
            self.close_connection = True
            self._send(b"(" * BIG, length=False)
        elif path == "/empty":
            self._send(b"")
        elif path.startswith("/redirect/"):
            left = int(path.rsplit("/", 1)[1])
            self.send_response(302)
            self.send_header("Location", f"/redirect/{left - 1}" if left > 1 else "/probe.wat")
            self.send_header("Content-Length", "0")
            self.end_headers()
        else:
            self.send_error(404, "Not Found")


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=2)


def test_http(server: str) -> None:
    assert GuestSource(f"{server}/probe.wat").read() == PROBE_BYTES
    assert GuestSource(f"{server}/probe.wat").read(PROBE_SHA) == PROBE_BYTES


def test_http_404(server: str) -> None:
    url = f"{server}/nothing.wasm"
    with pytest.raises(GuestLoadError) as excinfo:
        GuestSource(url).read()
    assert load_error(excinfo) == f"wasm guest {url}: HTTP 404 Not Found"


def test_http_body_over_the_size_cap(server: str) -> None:
    url = f"{server}/big"
    with pytest.raises(GuestLoadError) as excinfo:
        GuestSource(url, max_bytes=CAP).read()
    assert load_error(excinfo) == f"wasm guest {url}: Content-Length {BIG} is over the limit of {CAP} bytes"


def test_http_body_over_the_size_cap_without_content_length(server: str) -> None:
    url = f"{server}/big-unannounced"
    with pytest.raises(GuestLoadError) as excinfo:
        GuestSource(url, max_bytes=CAP).read()
    assert load_error(excinfo) == f"wasm guest {url}: body is over the limit of {CAP} bytes"
    assert GuestSource(url, max_bytes=BIG).read() == b"(" * BIG


def test_http_empty_body(server: str) -> None:
    url = f"{server}/empty"
    with pytest.raises(GuestLoadError) as excinfo:
        GuestSource(url).read()
    assert load_error(excinfo) == f"wasm guest {url}: the guest is empty (0 bytes)"


def test_http_redirects_up_to_the_limit(server: str) -> None:
    assert GuestSource(f"{server}/redirect/{MAX_REDIRECTS}").read() == PROBE_BYTES


def test_http_redirect_chain_longer_than_the_limit(server: str) -> None:
    url = f"{server}/redirect/{MAX_REDIRECTS + 3}"
    with pytest.raises(GuestLoadError) as excinfo:
        GuestSource(url).read()
    message = str(excinfo.value)
    assert message.startswith(f"wasm guest {url}: HTTP 302 ")
    assert "redirect" in message


def test_http_redirect_error_is_one_line(server: str) -> None:
    """urllib's too-many-redirects text is several lines; the message keeps one (was a bug)."""
    url = f"{server}/redirect/{MAX_REDIRECTS + 3}"
    with pytest.raises(GuestLoadError) as excinfo:
        GuestSource(url).read()
    load_error(excinfo)


def test_http_timeout() -> None:
    """A server that accepts the connection and never answers."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    try:
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/probe.wasm"
        with pytest.raises(GuestLoadError) as excinfo:
            GuestSource(url, timeout=0.1).read()
        message = load_error(excinfo)
        assert message.startswith(f"wasm guest {url}: ")
        assert "timed out" in message
    finally:
        listener.close()


def test_http_connection_refused() -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    url = f"http://127.0.0.1:{port}/probe.wasm"
    with pytest.raises(GuestLoadError) as excinfo:
        GuestSource(url, timeout=1).read()
    message = load_error(excinfo)
    assert message.startswith(f"wasm guest {url}: cannot fetch: ")
    assert "refused" in message.lower()


def test_http_guest_loads_and_runs(server: str, fresh: GuestCompiler) -> None:
    config = PluginConfig(name="remote", guest_url=f"{server}/probe.wat", guest_sha256=PROBE_SHA)
    guest = fresh.load(config)
    assert (guest.name, guest.url, guest.sha256, guest.origin) == ("remote", config.guest_url, PROBE_SHA,
                                                                   "compiled")
    inst = GuestInstance(guest, config, "remote-1")
    Script().returns(3).load(inst)
    assert inst.reserve({"metadata": {"name": "p"}}, "node-1", EmptyHandle()) == Status(
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "", "remote")


# --- files -------------------------------------------------------------------------------

def test_path(tmp_path: Path) -> None:
    target = tmp_path / "plugin.wasm"
    target.write_bytes(PROBE_BYTES)
    assert GuestSource(str(target)).read() == PROBE_BYTES


def test_relative_path_with_base_dir(tmp_path: Path) -> None:
    (tmp_path / "guests").mkdir()
    (tmp_path / "guests" / "plugin.wasm").write_bytes(PROBE_BYTES)
    assert GuestSource("guests/plugin.wasm", base_dir=str(tmp_path)).read() == PROBE_BYTES
    config = PluginConfig.from_args("rel", {"guestURL": "guests/plugin.wasm"}, base_dir=str(tmp_path))
    assert GuestSource(config.guest_url, config.base_dir).read() == PROBE_BYTES


def test_absolute_path_ignores_base_dir(tmp_path: Path) -> None:
    assert GuestSource(str(PROBE), base_dir=str(tmp_path)).read() == PROBE_BYTES


def test_file_url(tmp_path: Path) -> None:
    target = tmp_path / "dir with space" / "plugin.wasm"
    target.parent.mkdir()
    target.write_bytes(PROBE_BYTES)
    assert GuestSource(target.as_uri()).read() == PROBE_BYTES


def test_file_url_missing(tmp_path: Path) -> None:
    missing = tmp_path / "gone.wasm"
    with pytest.raises(GuestLoadError) as excinfo:
        GuestSource(missing.as_uri()).read()
    assert load_error(excinfo) == f"wasm guest {missing}: no such file"


def test_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.wasm"
    with pytest.raises(GuestLoadError) as excinfo:
        GuestSource(str(missing)).read()
    assert load_error(excinfo) == f"wasm guest {missing}: no such file"


def test_directory(tmp_path: Path) -> None:
    with pytest.raises(GuestLoadError) as excinfo:
        GuestSource(str(tmp_path)).read()
    assert load_error(excinfo) == f"wasm guest {tmp_path}: is a directory, not a .wasm file"


def test_empty_file(tmp_path: Path) -> None:
    empty = tmp_path / "empty.wasm"
    empty.write_bytes(b"")
    with pytest.raises(GuestLoadError) as excinfo:
        GuestSource(str(empty)).read()
    assert load_error(excinfo) == f"wasm guest {empty}: the guest is empty (0 bytes)"


def test_file_over_the_size_cap(tmp_path: Path) -> None:
    big = tmp_path / "big.wasm"
    big.write_bytes(bytes(BIG))
    with pytest.raises(GuestLoadError) as excinfo:
        GuestSource(str(big), max_bytes=CAP).read()
    assert load_error(excinfo) == f"wasm guest {big}: {BIG} bytes is over the limit of {CAP}"


def test_unsupported_scheme() -> None:
    with pytest.raises(GuestLoadError) as excinfo:
        GuestSource("ftp://example.invalid/plugin.wasm").read()
    assert load_error(excinfo) == ("wasm guest ftp://example.invalid/plugin.wasm: unsupported URL scheme "
                                   "'ftp' (use a path, file:// or http(s)://)")


def test_guest_sha256_match_and_mismatch(tmp_path: Path) -> None:
    target = tmp_path / "plugin.wasm"
    target.write_bytes(PROBE_BYTES)
    assert GuestSource(str(target)).read(PROBE_SHA) == PROBE_BYTES
    assert GuestSource(str(target)).read(PROBE_SHA.upper()) == PROBE_BYTES
    wrong = "0" * 64
    with pytest.raises(GuestLoadError) as excinfo:
        GuestSource(str(target)).read(wrong)
    assert load_error(excinfo) == (f"wasm guest {target}: guestSHA256 mismatch: expected {wrong}, "
                                   f"got {PROBE_SHA}")


def test_sha_mismatch_through_the_compiler(tmp_path: Path, fresh: GuestCompiler) -> None:
    target = tmp_path / "plugin.wasm"
    target.write_bytes(PROBE_BYTES)
    config = PluginConfig.from_args("pinned", {"guestURL": str(target), "guestSHA256": "ab" * 32})
    with pytest.raises(GuestLoadError) as excinfo:
        fresh.load(config)
    assert "guestSHA256 mismatch: expected " + "ab" * 32 in load_error(excinfo)


def test_fetch_error_through_the_compiler_names_the_plugin(tmp_path: Path, fresh: GuestCompiler) -> None:
    """A fetch error from GuestCompiler.load names the plugin, not only the URL (was a bug)."""
    config = PluginConfig(name="my-plugin", guest_url=str(tmp_path / "missing.wasm"))
    with pytest.raises(GuestLoadError) as excinfo:
        fresh.load(config)
    assert "my-plugin" in str(excinfo.value)


# --- what is not WebAssembly ----------------------------------------------------------------------

def test_non_wasm_binary_file(tmp_path: Path, fresh: GuestCompiler) -> None:
    target = tmp_path / "image.png"
    target.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)))
    data = GuestSource(str(target)).read()
    with pytest.raises(GuestLoadError) as excinfo:
        fresh.compile("png", str(target), data)
    assert load_error(excinfo) == f"wasm guest 'png' ({target}): not a WebAssembly module (no \\0asm header)"


def test_non_wasm_text_file(tmp_path: Path, fresh: GuestCompiler) -> None:
    target = tmp_path / "README.md"
    target.write_text("# not a module\n")
    with pytest.raises(GuestLoadError) as excinfo:
        fresh.load(PluginConfig(name="readme", guest_url=str(target)))
    assert load_error(excinfo) == (f"wasm guest 'readme' ({target}): not a WebAssembly module "
                                   "(no \\0asm header, no WAT module)")


def test_invalid_wat(fresh: GuestCompiler) -> None:
    with pytest.raises(GuestLoadError) as excinfo:
        fresh.compile("broken", "broken.wat", b'(module (func (export "filter") (result i32) (i32.cosnt 1)))')
    message = load_error(excinfo)
    assert message.startswith("wasm guest 'broken' (broken.wat): invalid WebAssembly text: ")
    assert "i32.cosnt" in message or "unknown operator" in message


def test_invalid_wasm_binary(fresh: GuestCompiler) -> None:
    with pytest.raises(GuestLoadError) as excinfo:
        fresh.compile("corrupt", "corrupt.wasm", b"\0asm\x01\0\0\0\x01\xff\xff\xff")
    assert load_error(excinfo).startswith("wasm guest 'corrupt' (corrupt.wasm): invalid WebAssembly: ")


def test_binary_wasm_is_accepted(fresh: GuestCompiler) -> None:
    import wasmtime

    binary = bytes(wasmtime.wat2wasm(MINIMAL.decode()))
    guest = fresh.compile("bin", "bin.wasm", binary)
    assert guest.exports == frozenset({"filter"})
    assert guest.sha256 == hashlib.sha256(binary).hexdigest()


# --- compiling once ---------------------------------------------------------------------------------

def test_compiles_once_per_compiler(fresh: GuestCompiler) -> None:
    first = fresh.compile("one", "one.wat", PROBE_BYTES)
    second = fresh.compile("two", "two.wat", PROBE_BYTES)
    assert first.origin == "compiled"
    assert second.origin == "memory"
    assert second.module is first.module
    assert (second.name, second.url) == ("two", "two.wat")
    assert first.sha256 == second.sha256 == PROBE_SHA
    other = fresh.compile("three", "three.wat", MINIMAL)
    assert other.origin == "compiled"
    assert other.module is not first.module


def test_two_compilers_do_not_share(fresh: GuestCompiler) -> None:
    with GuestCompiler() as other:
        a = fresh.compile("a", "a.wat", MINIMAL)
        b = other.compile("a", "a.wat", MINIMAL)
        assert a.origin == b.origin == "compiled"
        assert a.module is not b.module


def test_disk_cache(tmp_path: Path) -> None:
    with GuestCompiler(cache_dir=tmp_path) as first, GuestCompiler(cache_dir=tmp_path) as second:
        compiled = first.compile("probe", "probe.wat", PROBE_BYTES)
        assert compiled.origin == "compiled"
        artifacts = list(tmp_path.iterdir())
        assert [a.name.startswith(PROBE_SHA) and a.suffix == ".cwasm" for a in artifacts] == [True]
        loaded = second.compile("probe", "probe.wat", PROBE_BYTES)
        assert loaded.origin == "disk"
        assert loaded.sha256 == PROBE_SHA
        assert loaded.exports == compiled.exports
        assert second.compile("probe", "probe.wat", PROBE_BYTES).origin == "memory"
        # the module from disk runs
        inst = GuestInstance(loaded, PluginConfig(name="probe", guest_url="probe.wat"), "disk-1")
        Script().returns(0, -5).load(inst)
        assert inst.score({"metadata": {"name": "p"}}, ["node-1"], EmptyHandle()).scores[0].score == -5


def test_stale_disk_cache_is_recompiled(tmp_path: Path) -> None:
    with GuestCompiler(cache_dir=tmp_path) as first:
        first.compile("m", "m.wat", MINIMAL)
    [artifact] = tmp_path.iterdir()
    artifact.write_bytes(b"not a compiled module")
    with GuestCompiler(cache_dir=tmp_path) as second:
        guest = second.compile("m", "m.wat", MINIMAL)
        assert guest.origin == "compiled"
        assert guest.exports == frozenset({"filter"})
        assert artifact.read_bytes() != b"not a compiled module"
    with GuestCompiler(cache_dir=tmp_path) as third:
        assert third.compile("m", "m.wat", MINIMAL).origin == "disk"


# --- ABI validation ---------------------------------------------------------------------------------

def _mod(body: str) -> str:
    return f"(module {body})"


MEMORY = '(memory (export "memory") 1)'
FILTER = '(func (export "filter") (result i32) (i32.const 0))'
SCORE = '(func (export "score") (result i64) (i64.const 0))'

INVALID: dict[str, tuple[str, str]] = {
    "no memory export": (_mod(FILTER), "the module exports no memory named 'memory'"),
    "memory under another name": (_mod('(memory (export "mem") 1)' + FILTER),
                                  "the module exports no memory named 'memory'"),
    "memory is not a memory": (_mod('(global (export "memory") i32 (i32.const 0))' + FILTER),
                               "export 'memory' is not a memory"),
    "filter returns i64": (_mod(MEMORY + '(func (export "filter") (result i64) (i64.const 0))'),
                           "export 'filter' has signature () -> (i64), expected () -> (i32)"),
    "score returns i32": (_mod(MEMORY + '(func (export "score") (result i32) (i32.const 0))'),
                          "export 'score' has signature () -> (i32), expected () -> (i64)"),
    "permit takes a parameter": (
        _mod(MEMORY + '(func (export "permit") (param i32) (result i64) (i64.const 0))'),
        "export 'permit' has signature (i32) -> (i64), expected () -> (i64)"),
    "enqueue returns a value": (_mod(MEMORY + '(func (export "enqueue") (result i32) (i32.const 0))'),
                                "export 'enqueue' has signature () -> (i32), expected () -> ()"),
    "filter is a global": (_mod(MEMORY + '(global (export "filter") i32 (i32.const 0))'),
                           "export 'filter' is not a function"),
    "_start with a result": (_mod(MEMORY + FILTER + '(func (export "_start") (result i32) (i32.const 0))'),
                             "export '_start' must be a function () -> ()"),
    "prescore without score": (_mod(MEMORY + FILTER + '(func (export "prescore") (result i32) (i32.const 0))'),
                               "export 'prescore' requires export 'score', which is missing"),
    "normalizescore without score": (
        _mod(MEMORY + '(func (export "normalizescore") (result i32) (i32.const 0))'),
        "export 'normalizescore' requires export 'score', which is missing"),
    "no plugin export": (_mod(MEMORY + '(func (export "helper") (result i32) (i32.const 0))'),
                         "the module exports none of the plugin functions (enqueue, prefilter, filter, "
                         "postfilter, prescore, score, normalizescore, reserve, unreserve, permit, prebind, "
                         "bind, postbind, addpod, removepod)"),
    "import from an unknown module": (
        _mod('(import "env" "abort" (func))' + MEMORY + FILTER),
        "import env.abort: unknown module 'env'"),
    "unknown name in k8s.io/scheduler": (
        _mod('(import "k8s.io/scheduler" "currentPods" (func (param i32 i32) (result i32)))' + MEMORY + FILTER),
        "import k8s.io/scheduler.currentPods: the ABI defines no such host function"),
    "unknown name in k8s.io/api": (
        _mod('(import "k8s.io/api" "pod" (func (param i32 i32) (result i32)))' + MEMORY + FILTER),
        "import k8s.io/api.pod: the ABI defines no such host function"),
    "wrong host-import signature": (
        _mod('(import "k8s.io/api" "node" (func (param i32 i32) (result i32)))' + MEMORY + FILTER),
        "import k8s.io/api.node has signature (i32, i32) -> (i32), expected (i32, i32, i32, i32) -> (i32)"),
    "host import with a missing result": (
        _mod('(import "k8s.io/klog" "severity" (func))' + MEMORY + FILTER),
        "import k8s.io/klog.severity has signature () -> (), expected () -> (i32)"),
    "non-function import": (
        _mod('(import "k8s.io/scheduler" "currentPod" (global i32))' + MEMORY + FILTER),
        "import k8s.io/scheduler.currentPod: only functions may be imported"),
    "imported memory": (
        _mod('(import "k8s.io/api" "memory" (memory 1)) (export "memory" (memory 0))' + FILTER),
        "import k8s.io/api.memory: only functions may be imported"),
    "unknown WASI function": (
        _mod('(import "wasi_snapshot_preview1" "fd_teleport" (func (param i32) (result i32)))' + MEMORY
             + FILTER),
        "import wasi_snapshot_preview1.fd_teleport: not a wasi_snapshot_preview1 function"),
    "wrong WASI signature": (
        _mod('(import "wasi_snapshot_preview1" "fd_write" (func (param i32 i32) (result i32)))' + MEMORY
             + FILTER),
        "import wasi_snapshot_preview1.fd_write: wrong signature (i32, i32) -> (i32)"),
    "WASI clock with i32 precision": (
        _mod('(import "wasi_snapshot_preview1" "clock_time_get" (func (param i32 i32 i32) (result i32)))'
             + MEMORY + FILTER),
        "import wasi_snapshot_preview1.clock_time_get: wrong signature (i32, i32, i32) -> (i32)"),
}


@pytest.mark.parametrize("case", INVALID)
def test_validation_failure(case: str, fresh: GuestCompiler) -> None:
    wat, problem = INVALID[case]
    with pytest.raises(GuestLoadError) as excinfo:
        wat_guest(fresh, "bad-guest", wat)
    assert load_error(excinfo) == f"wasm guest 'bad-guest' (bad-guest.wat): {problem}"
    assert excinfo.value.problem == problem


def test_validation_failure_through_load(tmp_path: Path, fresh: GuestCompiler) -> None:
    target = tmp_path / "prescore-only.wat"
    target.write_text(_mod(MEMORY + '(func (export "prescore") (result i32) (i32.const 0))'))
    with pytest.raises(GuestLoadError) as excinfo:
        fresh.load(PluginConfig.from_args("lonely", {"guestURL": str(target)}))
    assert load_error(excinfo) == (f"wasm guest 'lonely' ({target}): export 'prescore' requires export "
                                   "'score', which is missing")


def test_valid_shapes(fresh: GuestCompiler) -> None:
    guest = wat_guest(fresh, "scorer", _mod(
        '(import "wasi_snapshot_preview1" "fd_read" (func (param i32 i32 i32 i32) (result i32)))'
        '(import "wasi_snapshot_preview1" "sched_yield" (func (result i32)))'
        '(import "k8s.io/klog" "severity" (func (result i32)))'
        + MEMORY + SCORE
        + '(func (export "prescore") (result i32) (i32.const 0))'
        + '(func (export "normalizescore") (result i32) (i32.const 0))'
        + '(func (export "helper"))'))
    assert guest.exports == frozenset({"score", "prescore", "normalizescore"})
    assert guest.shape.has_start is False
    assert [name for name, _ in guest.shape.wasi_imports] == ["fd_read", "sched_yield"]
    assert guest.shape.host_imports == frozenset({("k8s.io/klog", "severity")})


def test_unimplemented_wasi_function_answers_enosys(fresh: GuestCompiler) -> None:
    guest = wat_guest(fresh, "reader", _mod(
        '(import "wasi_snapshot_preview1" "fd_read" (func $fd_read (param i32 i32 i32 i32) (result i32)))'
        + MEMORY
        + '(func (export "filter") (result i32) (i32.store (i32.const 0) '
          '(call $fd_read (i32.const 0) (i32.const 16) (i32.const 1) (i32.const 32))) (i32.const 0))'))
    inst = GuestInstance(guest, PluginConfig(name="reader", guest_url="reader.wat"), "reader-1")
    [(_, status)] = inst.filter({"metadata": {"name": "p"}}, ["node-1"], EmptyHandle()).statuses
    assert status == Status(Code.SUCCESS, "", "reader")
    assert inst.memory.read_u32(0) == 52  # ENOSYS


# --- PluginConfig.from_args ---------------------------------------------------------------------------

def test_from_args_full() -> None:
    config = PluginConfig.from_args("nodenumber", {
        "guestURL": "https://example.com/plugin.wasm",
        "guestConfig": '{"reverse": true}',
        "logSeverity": 2,
        "args": ["nodenumber", "-v"],
        "guestSHA256": PROBE_SHA.upper(),
        "pool": {"minIdle": 2, "idleSeconds": 1.5, "maxInstances": 8},
    }, base_dir="/etc/scheduler")
    assert config.name == "nodenumber"
    assert config.guest_url == "https://example.com/plugin.wasm"
    assert config.guest_config == '{"reverse": true}'
    assert config.log_severity == 2
    assert config.args == ("nodenumber", "-v")
    assert config.guest_sha256 == PROBE_SHA
    assert (config.pool.min_idle, config.pool.idle_seconds, config.pool.max_instances) == (2, 1.5, 8)
    assert config.base_dir == "/etc/scheduler"


def test_from_args_defaults() -> None:
    config = PluginConfig.from_args("p", {"guestURL": "plugin.wasm"})
    assert (config.guest_config, config.log_severity, config.args, config.guest_sha256) == ("", 0, (), "")


CONFIG_ERRORS: dict[str, tuple[object, str]] = {
    "args not a mapping": (["guestURL"], "args must be a mapping, got list"),
    "no guestURL": ({}, "args.guestURL must be a non-empty string"),
    "empty guestURL": ({"guestURL": ""}, "args.guestURL must be a non-empty string"),
    "guestURL not a string": ({"guestURL": 3}, "args.guestURL must be a non-empty string"),
    "guestConfig not a string": ({"guestURL": "x.wasm", "guestConfig": {"a": 1}},
                                 "args.guestConfig must be a string"),
    "logSeverity too high": ({"guestURL": "x.wasm", "logSeverity": 4}, "args.logSeverity must be 0 (info), "
                             "1 (warning), 2 (error) or 3 (fatal), got 4"),
    "logSeverity negative": ({"guestURL": "x.wasm", "logSeverity": -1}, "args.logSeverity must be 0"),
    "logSeverity a bool": ({"guestURL": "x.wasm", "logSeverity": True}, "got True"),
    "logSeverity a string": ({"guestURL": "x.wasm", "logSeverity": "2"}, "args.logSeverity must be 0"),
    "args not a list": ({"guestURL": "x.wasm", "args": "a b"}, "args.args must be a list of strings"),
    "args with a number": ({"guestURL": "x.wasm", "args": ["a", 1]}, "args.args must be a list of strings"),
    "guestSHA256 too short": ({"guestURL": "x.wasm", "guestSHA256": "abc"},
                              "args.guestSHA256 must be 64 hexadecimal digits"),
    "guestSHA256 not hex": ({"guestURL": "x.wasm", "guestSHA256": "g" * 64},
                            "args.guestSHA256 must be 64 hexadecimal digits"),
    "pool not a mapping": ({"guestURL": "x.wasm", "pool": 3}, "args.pool must be a mapping"),
    "pool.minIdle negative": ({"guestURL": "x.wasm", "pool": {"minIdle": -1}},
                              "args.pool.minIdle must be a non-negative number, got -1"),
    "pool.maxInstances fractional": ({"guestURL": "x.wasm", "pool": {"maxInstances": 1.5}},
                                     "args.pool.maxInstances must be a whole number, got 1.5"),
    "pool.idleSeconds a string": ({"guestURL": "x.wasm", "pool": {"idleSeconds": "60"}},
                                  "args.pool.idleSeconds must be a non-negative number, got '60'"),
    "unknown field": ({"guestURL": "x.wasm", "guestUrl": "y.wasm"},
                      "unknown args field 'guestUrl' (did you mean guestURL?)"),
    "limits not a mapping": ({"guestURL": "x.wasm", "limits": []}, "args.limits must be a mapping"),
    "limits.callTimeoutMs zero": ({"guestURL": "x.wasm", "limits": {"callTimeoutMs": 0}},
                                  "args.limits.callTimeoutMs must be a positive whole number, got 0"),
    "limits.memoryLimitMiB fractional": ({"guestURL": "x.wasm", "limits": {"memoryLimitMiB": 1.5}},
                                         "args.limits.memoryLimitMiB must be a positive whole number"),
    "unknown limits field": ({"guestURL": "x.wasm", "limits": {"cpu": 1}},
                             "unknown args.limits field 'cpu'; known: callTimeoutMs"),
}


@pytest.mark.parametrize("case", CONFIG_ERRORS)
def test_from_args_errors(case: str) -> None:
    args, problem = CONFIG_ERRORS[case]
    with pytest.raises(PluginConfigError) as excinfo:
        PluginConfig.from_args("my-wasm-plugin", args)  # type: ignore[arg-type]
    message = str(excinfo.value)
    assert message.startswith("plugin 'my-wasm-plugin': ")
    assert problem in message
    assert "\n" not in message

"""Compiling guests once and sharing the result.

This module owns the wasmtime `Engine` and the compiled-module cache of a runtime:
`GuestCompiler.load(config)` fetches a guest, checks its integrity, compiles it at
most once per compiler (modules are keyed by the SHA-256 of their bytes, so two
plugins with the same guest share one module), optionally keeps the compiled
artifact on disk so the next process skips compilation, and validates it against the
ABI. Engine and Module are thread-safe and shared by every instance; a Store never
is. One compiler is made by whoever embeds the runtime (the CLI makes one per
process, with the cache in `default_cache_dir()`); nothing here is global.

The on-disk cache is safe to share between processes: an entry is named by the guest's
SHA-256, the wasmtime version and the machine, written to a temporary file in the same
folder and renamed into place (readers see a whole entry or none), and carries a
checksum of its contents. An entry that is truncated, corrupt or refused by this
wasmtime (another version or engine configuration) is compiled again and rewritten; a
folder that cannot be written is a warning, and the guest still runs.

See `docs/performance.md` for the cache and `docs/reliability.md` for the deadlines.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import platform
import re
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import wasmtime

from wasm_scheduler.logger import get_logger
from wasm_scheduler.registry.config import PluginConfig
from wasm_scheduler.registry.errors import GuestLoadError
from wasm_scheduler.registry.guest_abi import Export
from wasm_scheduler.registry.source import GuestSource
from wasm_scheduler.registry.validation import GuestShape, validate

log = get_logger("registry")


@dataclass(frozen=True)
class CompiledGuest:
    """A validated, compiled guest ready to be instantiated any number of times."""

    name: str
    url: str
    sha256: str
    engine: wasmtime.Engine
    module: wasmtime.Module
    compiler: GuestCompiler
    shape: GuestShape
    #: "compiled", "memory" (this process already had it) or "disk" (artifact cache).
    origin: str
    load_ms: float

    @property
    def exports(self) -> frozenset[Export]:
        return self.shape.exports


#: Milliseconds between two epoch ticks: the resolution of call deadlines.
EPOCH_TICK_MS = 5


def new_engine() -> wasmtime.Engine:
    """An engine whose stores can be interrupted at a deadline (epoch interruption)."""
    config = wasmtime.Config()
    config.cranelift_opt_level = "speed"
    config.epoch_interruption = True
    return wasmtime.Engine(config)


def deadline_ticks(timeout_ms: int) -> int:
    """Epoch ticks to allow for a call of at most `timeout_ms` (at least the timeout)."""
    return -(-timeout_ms // EPOCH_TICK_MS) + 1


class EpochTicker:
    """Advances an engine's epoch every EPOCH_TICK_MS, so guest calls meet their deadlines.

    A daemon thread: it never keeps the process alive, and `close()` ends it.
    """

    def __init__(self, engine: wasmtime.Engine) -> None:
        self._engine = engine
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="wasm-epoch-ticker", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(EPOCH_TICK_MS / 1000):
            self._engine.increment_epoch()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=1)


class GuestCompiler:
    """An engine and the modules compiled with it."""

    def __init__(
        self, cache_dir: Path | None = None, engine: wasmtime.Engine | None = None, fast_calls: bool = True
    ) -> None:
        self.engine = engine or new_engine()
        #: Call exports through wasmtime's unchecked C call when available (actors.fast_call).
        self.fast_calls = fast_calls
        self.cache_dir = cache_dir
        self._modules: dict[str, wasmtime.Module] = {}
        self._helpers: dict[str, wasmtime.Module] = {}
        self._lock = threading.Lock()  # guards the cache dict, not any instance
        self._ticker: EpochTicker | None = None

    def ensure_ticking(self) -> None:
        """Start the epoch ticker (once); instances call this before running guest code."""
        if self._ticker is None:
            with self._lock:
                if self._ticker is None:
                    self._ticker = EpochTicker(self.engine)

    def close(self) -> None:
        """Stop the epoch ticker. Compiled modules stay usable; deadlines stop advancing."""
        with self._lock:
            ticker, self._ticker = self._ticker, None
        if ticker is not None:
            ticker.close()

    def __enter__(self) -> GuestCompiler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def helper_module(self, name: str, wat: str) -> wasmtime.Module:
        """A module of the runtime's own (WAT text), compiled once per compiler and engine."""
        with self._lock:
            module = self._helpers.get(name)
            if module is None:
                module = self._helpers[name] = wasmtime.Module(self.engine, wat)
        return module

    def load(self, config: PluginConfig) -> CompiledGuest:
        """Fetch, verify, compile (or reuse) and validate the guest of `config`."""
        started = time.perf_counter()
        guest = f"{config.name!r} ({config.guest_url})"
        try:
            data = GuestSource(config.guest_url, config.base_dir).read(config.guest_sha256)
        except GuestLoadError as exc:
            raise GuestLoadError(f"{config.name!r} ({exc.guest})", exc.problem) from None
        return self.compile(config.name, config.guest_url, data, started, guest)

    def compile(self, name: str, url: str, data: bytes, started: float | None = None,
                guest: str | None = None) -> CompiledGuest:
        started = time.perf_counter() if started is None else started
        guest = guest or f"{name!r} ({url})"
        digest = hashlib.sha256(data).hexdigest()
        with self._lock:
            module = self._modules.get(digest)
            origin = "memory"
            if module is None:
                module, origin = self._compile(guest, digest, data, url)
                self._modules[digest] = module
        shape = validate(guest, module)
        elapsed = (time.perf_counter() - started) * 1000
        log.info("guest.loaded", plugin=name, url=url, sha256=digest[:12], origin=origin,
                 exports=sorted(shape.exports), duration_ms=round(elapsed, 2))
        self.ensure_ticking()
        return CompiledGuest(name, url, digest, self.engine, module, self, shape, origin, elapsed)

    def _compile(self, guest: str, digest: str, data: bytes, url: str = "") -> tuple[wasmtime.Module, str]:
        artifact = self._artifact_path(digest)
        if artifact is not None:
            cached = self._read_artifact(artifact)
            if cached is not None:
                return cached, "disk"
        if not data.startswith(b"\0asm"):
            data = _wat_to_wasm(guest, data, url)
        try:
            module = wasmtime.Module(self.engine, data)
        except wasmtime.WasmtimeError as exc:
            raise GuestLoadError(guest, f"invalid WebAssembly: {_first_line(exc)}") from None
        if artifact is not None:
            _write_artifact(artifact, module.serialize())
        return module, "compiled"

    def _read_artifact(self, artifact: Path) -> wasmtime.Module | None:
        """The module of a cache entry; None (and a warning) for a missing, damaged or refused one."""
        try:
            blob = artifact.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            log.warning("guest.cache_corrupt", path=str(artifact), reason=f"cannot read it: {exc.strerror or exc}")
            return None
        payload = _checked_payload(blob)
        if payload is None:
            log.warning("guest.cache_corrupt", path=str(artifact),
                        reason="truncated or damaged (wrong header, length or checksum)")
            return None
        try:
            # Safe only because the checksum proves these are the bytes this cache wrote;
            # wasmtime itself refuses an artifact of another version or engine configuration.
            return wasmtime.Module.deserialize(self.engine, payload)
        except wasmtime.WasmtimeError:
            log.warning("guest.cache_stale", path=str(artifact))
            return None

    def _artifact_path(self, digest: str) -> Path | None:
        if self.cache_dir is None:
            return None
        version = getattr(wasmtime, "__version__", "") or _wasmtime_version()
        return self.cache_dir / f"{digest}-wasmtime{version}-{platform.machine() or 'any'}.cwasm"


#: First bytes of a cache entry: this format's name and version. A SHA-256 of the payload
#: and the payload (wasmtime's serialized module) follow.
_ARTIFACT_MAGIC = b"wasm-scheduler artifact 1\n"
_DIGEST_BYTES = 32


def _checked_payload(blob: bytes) -> bytes | None:
    """The serialized module of a cache entry, or None when the entry is not whole and intact."""
    head = len(_ARTIFACT_MAGIC) + _DIGEST_BYTES
    if len(blob) <= head or not blob.startswith(_ARTIFACT_MAGIC):
        return None
    payload = blob[head:]
    if hashlib.sha256(payload).digest() != blob[len(_ARTIFACT_MAGIC):head]:
        return None
    return payload


def _write_artifact(artifact: Path, payload: bytes | bytearray) -> None:
    """Write a cache entry atomically: a private temporary file in the same folder, then a rename,
    so a concurrent reader or writer never sees half an entry. Failure is a warning only."""
    tmp: str | None = None
    try:
        artifact.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=artifact.parent, prefix=f".{artifact.name}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as file:
            file.write(_ARTIFACT_MAGIC + hashlib.sha256(payload).digest() + payload)
        os.replace(tmp, artifact)
        tmp = None
    except OSError as exc:
        log.warning("guest.cache_unwritable", path=str(artifact), error=exc.strerror or str(exc))
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def default_cache_dir(environ: Mapping[str, str] | None = None, home: Path | None = None,
                      system: str | None = None) -> Path:
    """Where compiled guests are cached by default: the user's cache folder, ``wasm-scheduler`` in it.

    Linux and other Unix: ``$XDG_CACHE_HOME`` when it is an absolute path, else ``~/.cache``;
    macOS: ``~/Library/Caches``; Windows: ``%LOCALAPPDATA%`` (``...\\wasm-scheduler\\Cache``).
    The arguments default to this process's environment, home and platform (tests pass their own).
    """
    environ = os.environ if environ is None else environ
    home = Path.home() if home is None else home
    system = sys.platform if system is None else system
    if system.startswith("win"):
        local = environ.get("LOCALAPPDATA") or str(home / "AppData" / "Local")
        return Path(local) / "wasm-scheduler" / "Cache"
    if system == "darwin":
        return home / "Library" / "Caches" / "wasm-scheduler"
    xdg = environ.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else home / ".cache"
    return base / "wasm-scheduler"


def _wasmtime_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("wasmtime")
    except PackageNotFoundError:
        return "unknown"


#: Where wat2wasm's error text places a syntax error: `` --> <anon>:4:3``.
_WAT_LOCATION = re.compile(r"-->\s*\S*?:(\d+):(\d+)")


def _wat_to_wasm(guest: str, data: bytes, url: str = "") -> bytes:
    """A guest given as WebAssembly text (handy for tests and examples), compiled to binary.
    A syntax error names the file, line and column (``x.wat:4:3: expected ...``)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise GuestLoadError(guest, "not a WebAssembly module (no \\0asm header)") from None
    if "(module" not in text:
        raise GuestLoadError(guest, "not a WebAssembly module (no \\0asm header, no WAT module)")
    try:
        return bytes(wasmtime.wat2wasm(text))
    except wasmtime.WasmtimeError as exc:
        found = _WAT_LOCATION.search(str(exc))
        line, column = (found.group(1), found.group(2)) if found else ("", "")
        where = "" if not found else f"{url}:{line}:{column}: " if url else f"line {line}, column {column}: "
        raise GuestLoadError(guest, f"invalid WebAssembly text: {where}{_first_line(exc)}") from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__

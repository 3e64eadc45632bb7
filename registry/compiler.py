"""Compiling guests once and sharing the result.

This module owns the wasmtime `Engine` and the compiled-module cache of a runtime:
`GuestCompiler.load(config)` fetches a guest, checks its integrity, compiles it at
most once per compiler (modules are keyed by the SHA-256 of their bytes, so two
plugins with the same guest share one module), optionally keeps the compiled
artifact on disk so the next process skips compilation, and validates it against the
ABI. Engine and Module are thread-safe and shared by every instance; a Store never
is. One compiler is made by whoever embeds the runtime (the CLI makes one per
process); nothing here is global.
"""

from __future__ import annotations

import hashlib
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import structlog
import wasmtime

from wasm_scheduler.registry.config import PluginConfig
from wasm_scheduler.registry.errors import GuestLoadError
from wasm_scheduler.registry.source import GuestSource
from wasm_scheduler.registry.validation import GuestShape, validate

log = structlog.get_logger("registry")


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
    def exports(self) -> frozenset[str]:
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

    A daemon thread: it never keeps the process alive, and `stop()` ends it.
    """

    def __init__(self, engine: wasmtime.Engine) -> None:
        self._engine = engine
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="wasm-epoch-ticker", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(EPOCH_TICK_MS / 1000):
            self._engine.increment_epoch()

    def stop(self) -> None:
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
            ticker.stop()

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
                module, origin = self._compile(guest, digest, data)
                self._modules[digest] = module
        shape = validate(guest, module)
        elapsed = (time.perf_counter() - started) * 1000
        log.info("guest.loaded", plugin=name, url=url, sha256=digest[:12], origin=origin,
                 exports=sorted(shape.exports), duration_ms=round(elapsed, 2))
        self.ensure_ticking()
        return CompiledGuest(name, url, digest, self.engine, module, self, shape, origin, elapsed)

    def _compile(self, guest: str, digest: str, data: bytes) -> tuple[wasmtime.Module, str]:
        artifact = self._artifact_path(digest)
        if artifact is not None and artifact.exists():
            try:
                return wasmtime.Module.deserialize_file(self.engine, str(artifact)), "disk"
            except wasmtime.WasmtimeError:
                log.warning("guest.cache_stale", path=str(artifact))
        if not data.startswith(b"\0asm"):
            data = _wat_to_wasm(guest, data)
        try:
            module = wasmtime.Module(self.engine, data)
        except wasmtime.WasmtimeError as exc:
            raise GuestLoadError(guest, f"invalid WebAssembly: {_first_line(exc)}") from None
        if artifact is not None:
            try:
                artifact.parent.mkdir(parents=True, exist_ok=True)
                tmp = artifact.with_suffix(".tmp")
                tmp.write_bytes(module.serialize())
                tmp.replace(artifact)
            except OSError as exc:
                log.warning("guest.cache_unwritable", path=str(artifact), error=str(exc))
        return module, "compiled"

    def _artifact_path(self, digest: str) -> Path | None:
        if self.cache_dir is None:
            return None
        version = getattr(wasmtime, "__version__", "") or _wasmtime_version()
        return self.cache_dir / f"{digest}-wasmtime{version}.cwasm"


def _wasmtime_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("wasmtime")
    except PackageNotFoundError:
        return "unknown"


def _wat_to_wasm(guest: str, data: bytes) -> bytes:
    """A guest given as WebAssembly text (handy for tests and examples), compiled to binary."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise GuestLoadError(guest, "not a WebAssembly module (no \\0asm header)") from None
    if "(module" not in text:
        raise GuestLoadError(guest, "not a WebAssembly module (no \\0asm header, no WAT module)")
    try:
        return bytes(wasmtime.wat2wasm(text))
    except wasmtime.WasmtimeError as exc:
        raise GuestLoadError(guest, f"invalid WebAssembly text: {_first_line(exc)}") from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__

"""The call paths between Python and wasm: exports in, host functions out, deadlines.

This module owns how Python enters wasm for an extension-point export (`UncheckedCall`:
`wasmtime_func_call_unchecked` on preallocated buffers), how wasm calls back into the
host functions (`wasmtime_linker_define_func_unchecked` with raw ctypes callbacks), and
`EpochDeadline`, which gives every node of a batch run in wasm (`actors.node_loop`) its
own deadline. Every private binding comes from `actors.wasmtime_internals`, and a fast
path is built only when its check found every piece working and fast calls were not
turned off (`GuestCompiler(fast_calls=False)`); `ExportCaller` is the public API's
path. Both raise the same exceptions: the Python exception a host function raised
(recorded per instance in a `HostFault`), `DeadlineExceeded`, a `wasmtime.Trap` or a
`wasmtime.WasmtimeError`. `docs/performance.md` ("Why each fast path exists") has the
figures.
"""

from __future__ import annotations

import ctypes
import time
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import wasmtime

from wasm_scheduler.actors.wasmtime_internals import VALUE_SIZE, internals, require_internals

#: Whether the fast paths can be built: `internals()`'s answer, asked when the name is
#: first read (`__getattr__` below), never at import. Code that builds a call path asks
#: `internals()` itself, when it builds.
FAST_PATH_AVAILABLE: bool


def __getattr__(name: str) -> bool:
    if name == "FAST_PATH_AVAILABLE":
        return internals() is not None
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_VP = ctypes.c_void_p

_monotonic_ns = time.monotonic_ns

#: Nanoseconds between two re-arms of the epoch deadline on the fast path (one tick).
EPOCH_REARM_NS = 5_000_000


class HostFault:
    """The exception a host function of one instance raised during the current call."""

    __slots__ = ("error",)

    def __init__(self) -> None:
        self.error: BaseException | None = None

    def wrap(self, func: Callable[..., Any]) -> Callable[..., Any]:
        """`func`, recording any exception it raises before wasmtime turns it into a trap
        (the public-API path; the fast path's callbacks record it themselves)."""
        def host_function(*args: Any) -> Any:
            try:
                return func(*args)
            except BaseException as exc:
                self.error = exc
                raise

        host_function.__name__ = getattr(func, "__name__", "host_function")
        return host_function

    def take(self) -> BaseException | None:
        error, self.error = self.error, None
        if error is not None:
            found = internals()
            if found is not None:  # ours: never leave it in wasmtime-py for another instance to raise
                found.forget_host_exception(error)
        return error


@dataclass(slots=True)
class PerNode:
    """Raw results of one export called once per node: the code (or packed i64, signed)
    of each node that ran, the reasons the guest set on the non-zero ones (by index), and the
    exception that stopped the loop, if any (the nodes after it did not run)."""

    values: array[int]  # signed i64 each, whichever loop ran
    reasons: dict[int, str]
    error: BaseException | None = None


class ExportCaller:
    """Calls one export of one instance: `caller(ticks)` once, `caller.per_node(...)` per node.

    `ticks` is the call's deadline in epoch ticks. The public-API path; `_FastCaller`
    overrides both methods with the unchecked C call.
    """

    def __init__(self, store: wasmtime.Store, func: wasmtime.Func, result: str | None, fault: HostFault) -> None:
        self.store = store
        self.func = func
        self.result = result
        self.fault = fault

    def __call__(self, ticks: int) -> Any:
        self.store.set_epoch_deadline(ticks)
        try:
            return self.func(self.store)
        except BaseException:
            error = self.fault.take()
            if error is not None:
                raise error from None
            raise

    def per_node(self, ctx: Any, names: Sequence[str], ticks: int, stop_mask: int = 0) -> PerNode:
        """Run the export once per node name with `ctx.node_name` set; never raises.

        With `stop_mask`, the loop ends after the first value with any of those bits set
        (Score stops at the first node whose status is not Success)."""
        values: list[int] = []
        reasons: dict[int, str] = {}
        for name in names:
            ctx.node_name = name
            try:
                value = self(ticks)
            except BaseException as exc:
                if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                    raise
                return PerNode(array("q", values), reasons, exc)
            if value and ctx.reason:
                reasons[len(values)] = ctx.reason
            ctx.reason = ""
            values.append(value)
            if value & stop_mask:
                break
        return PerNode(array("q", values), reasons)


def make_export_caller(
    store: wasmtime.Store, func: wasmtime.Func, result: str | None, fault: HostFault,
    deadline: EpochDeadline | None = None,
) -> ExportCaller:
    """The fastest caller available for the export (`result`: "i32", "i64" or None):
    the unchecked C call when the store has an `EpochDeadline` (fast path), else the
    public API."""
    if deadline is not None:
        return _FastCaller(store, func, result, fault, deadline)
    return ExportCaller(store, func, result, fault)


class DeadlineExceeded(Exception):
    """A guest call ran past its deadline (the epoch callback's verdict)."""


class EpochDeadline:
    """The epoch deadline of one store, shared by every call into it (fast path).

    A call arms the deadline `ticks + 1` epoch ticks ahead, at most once per tick (a
    call gets its full deadline less at most one tick, for one C call less per call).
    A batch of per-node calls (`actors.node_loop`) is one call from Python, so it arms
    one tick ahead and reports its progress: wasmtime's deadline callback lets it go on
    while the node index moves, and stops it once one node has run `ticks` ticks. Every
    node keeps the call's deadline; the batch as a whole has none.
    """

    __slots__ = ("context", "fault", "ticks", "armed_at", "progress", "_last", "_stalled", "_callback",
                 "_arm", "_error_new")

    def __init__(self, store: wasmtime.Store, fault: HostFault, ticks: int) -> None:
        found = require_internals()
        self.context = found.context_address(store)
        self._arm, self._error_new = found.set_epoch_deadline, found.error_new
        self.fault = fault
        self.ticks = ticks
        self.armed_at = -EPOCH_REARM_NS
        #: During a batch: reads the index of the node running now.
        self.progress: Callable[[], int] | None = None
        self._last = -1
        self._stalled = 0
        self._callback = found.set_deadline_callback(store, self._on_deadline)

    def begin_batch(self, progress: Callable[[], int]) -> None:
        self.progress = progress
        self._last, self._stalled = -1, 0
        arm = self._arm
        arm(self.context, 1)

    def end_batch(self) -> None:
        self.progress = None
        self.armed_at = -EPOCH_REARM_NS  # the deadline left is at most a tick: re-arm on the next call

    def _on_deadline(self, _context: Any, _env: Any, delta: int, kind: int) -> int:
        try:
            if self.progress is not None:
                index = self.progress()
                if index != self._last:
                    self._last, self._stalled = index, 0
                else:
                    self._stalled += 1
                if self._stalled <= self.ticks:
                    ctypes.c_uint64.from_address(delta).value = 1
                    ctypes.c_uint8.from_address(kind).value = 0  # WASMTIME_UPDATE_DEADLINE_CONTINUE
                    return 0
            self.fault.error = DeadlineExceeded()
        except BaseException as exc:  # pragma: no cover - a bug here must still stop the guest
            self.fault.error = exc
        message = b"deadline exceeded"
        error_new = self._error_new
        return error_new(message) or 0


class UncheckedCall:
    """One function of a store called through wasmtime_func_call_unchecked.

    Parameters (i32/i64) are written into a preallocated value array; the result (one
    i32/i64, or none) is read back from it. No deadline handling: callers arm it."""

    def __init__(self, store: wasmtime.Store, func: wasmtime.Func, params: Sequence[str],
                 result: str | None, fault: HostFault) -> None:
        found = require_internals()
        self.fault = fault
        self._internals = found
        self._func = func  # its handle's address is passed to every call: keep it alive
        context = found.context_address(store)
        self._values = (found.val_raw * max(1, len(params)))()
        values_addr = ctypes.addressof(self._values)
        self._params = [
            (ctypes.c_int32 if kind == "i32" else ctypes.c_int64).from_address(values_addr + i * VALUE_SIZE)
            for i, kind in enumerate(params)
        ]
        self._trap = ctypes.c_void_p(None)
        self._read = (ctypes.c_int32 if result == "i32" else ctypes.c_int64).from_address(values_addr)
        self.result = result
        # The call's arguments as ctypes objects, made once: ctypes passes them as they are
        # instead of converting a Python int per argument per call (about 0.2 us a call).
        self._args = (_VP(context), _VP(found.func_address(func)), _VP(values_addr),
                      ctypes.c_size_t(max(1, len(params))), _VP(ctypes.addressof(self._trap)))
        self._raw_call = found.func_call_unchecked

    def raise_failure(self, error: int | None) -> None:
        """Raise what stopped the call: the host function's exception, the trap, or the error."""
        raised = self.fault.take()
        if self._trap.value:
            trap_obj = self._internals.trap_from_address(self._trap.value)
            self._trap.value = None
            raise (raised or trap_obj) from None
        failure = self._internals.error_from_address(error) if error else None
        if raised is not None:
            raise raised from None
        raise failure or wasmtime.WasmtimeError("call failed without a trap or an error")

    def __call__(self, *args: int) -> Any:
        for slot, value in zip(self._params, args, strict=True):
            slot.value = value
        raw_call = self._raw_call  # a local: `self._raw_call(...)` is a slower method lookup
        error = raw_call(*self._args)
        if error or self._trap.value:
            self.raise_failure(error)
        return self._read.value if self.result is not None else None


class _FastCaller(ExportCaller):
    """An export without parameters through `UncheckedCall`, with the shared deadline."""

    def __init__(self, store: wasmtime.Store, func: wasmtime.Func, result: str | None, fault: HostFault,
                 deadline: EpochDeadline) -> None:
        super().__init__(store, func, result, fault)
        self._call = UncheckedCall(store, func, (), result, fault)
        self._deadline = deadline
        self._context = deadline.context
        # The call's pieces as attributes of this object: one lookup each per call.
        self._args, self._trap, self._read = self._call._args, self._call._trap, self._call._read
        self._raw_call, self._arm = self._call._raw_call, deadline._arm

    def __call__(self, ticks: int) -> Any:
        now = _monotonic_ns()
        deadline = self._deadline
        if now - deadline.armed_at >= EPOCH_REARM_NS:
            arm = self._arm
            arm(self._context, ticks + 1)
            deadline.armed_at = now
        raw_call = self._raw_call  # a local: `self._raw_call(...)` is a slower method lookup
        error = raw_call(*self._args)
        if error or self._trap.value:
            deadline.armed_at = -EPOCH_REARM_NS
            self._call.raise_failure(error)
        return self._read.value if self.result is not None else None


# --- host functions --------------------------------------------------------------------

_LETTERS = {"i32": "i", "i64": "q"}


class HostFunctionDefiner:
    """Defines an instance's host functions on its linker, the fast way when it can.

    The fast way registers a raw ctypes callback with
    `wasmtime_linker_define_func_unchecked`: arguments are read straight from the
    value array and the result written back, instead of wasmtime-py's generic
    trampoline (which builds a Caller and converts every value). A Python exception in a
    host function is recorded in the instance's `HostFault` and becomes a trap.
    The callbacks live as long as this object, which the instance keeps.
    """

    def __init__(self, linker: wasmtime.Linker, fault: HostFault, fast: bool = True) -> None:
        self.linker = linker
        self.fault = fault
        self._internals = internals() if fast else None
        self.fast = self._internals is not None
        self._keep: list[Any] = []

    def __call__(self, module: str, name: str, params: Sequence[str], results: Sequence[str],
                 func: Callable[..., Any]) -> None:
        found = self._internals
        if found is None:
            kinds = {"i32": wasmtime.ValType.i32(), "i64": wasmtime.ValType.i64()}
            functype = wasmtime.FuncType([kinds[p] for p in params], [kinds[r] for r in results])
            self.linker.define_func(module, name, functype, self.fault.wrap(func))
            return
        callback = self._raw_callback(func, params, results, found.trap_new)
        kinds = {"i32": wasmtime.ValType.i32(), "i64": wasmtime.ValType.i64()}
        functype = wasmtime.FuncType([kinds[p] for p in params], [kinds[r] for r in results])
        raw = found.define_unchecked(self.linker, module, name, functype, callback)
        self._keep.extend((raw, functype))

    def _raw_callback(self, func: Callable[..., Any], params: Sequence[str], results: Sequence[str],
                      trap_new: Callable[[bytes, int], int | None]) -> Callable[..., int]:
        import struct

        fault = self.fault
        arg_format = "<" + "".join(_LETTERS[p] + ("12x" if p == "i32" else "8x") for p in params)
        unpack = struct.Struct(arg_format).unpack_from if params else None
        size = VALUE_SIZE * len(params)
        string_at = ctypes.string_at
        result_kind = {"i32": ctypes.c_uint32, "i64": ctypes.c_uint64}.get(results[0]) if results else None
        mask = 0xFFFF_FFFF if results and results[0] == "i32" else 0xFFFF_FFFF_FFFF_FFFF

        def callback(_env: Any, _caller: Any, values: int, _count: int) -> int:
            try:
                value = func(*unpack(string_at(values, size))) if unpack is not None else func()
                if result_kind is not None:
                    result_kind.from_address(values).value = value & mask
                return 0
            except BaseException as exc:
                fault.error = exc
                message = f"host function raised {type(exc).__name__}".encode()
                return trap_new(message, len(message)) or 0

        return callback

"""The call path into a guest export: wasmtime's unchecked C call, or the public API.

This module owns how Python enters wasm for an extension-point export. wasmtime-py's
`Func.__call__` re-reads the function type, converts values and allocates on every
call (about 15 us here); the exports of the ABI take no parameters and return at most
one i32/i64, whose types the loader already validated, so the host can call
`wasmtime_func_call_unchecked` through wasmtime-py's own ctypes bindings with
preallocated buffers (about 1.5 us, near the raw floor). Those bindings are private,
so the fast path is used only when every piece it needs is present (checked once, at
import); otherwise, or when asked (`fast=False`), the public API is used. Both paths
raise the same exceptions: the Python exception a host function raised (recorded per
instance, so concurrent instances never see each other's), a `wasmtime.Trap`, or a
`wasmtime.WasmtimeError` (a `proc_exit` arrives as its `ExitTrap`).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import wasmtime

try:  # private pieces of wasmtime-py; absent pieces disable the fast path
    from wasmtime import _ffi as _wffi
    from wasmtime import _func as _wfunc
    from wasmtime._trap import Trap as _Trap

    _CALL_UNCHECKED = _wffi.wasmtime_func_call_unchecked
    _SET_DEADLINE = _wffi.wasmtime_context_set_epoch_deadline
    _RAW = _wffi.wasmtime_val_raw_t
    _TRAP_PTR = ctypes.POINTER(_wffi.wasm_trap_t)
    FAST_PATH_AVAILABLE = all((
        hasattr(wasmtime.Func, "__init__"), hasattr(_wfunc, "LAST_EXCEPTION"),
        hasattr(_Trap, "_from_ptr"), hasattr(wasmtime.WasmtimeError, "_from_ptr"),
        hasattr(_RAW, "i32"), hasattr(_RAW, "i64"),
    ))
except (ImportError, AttributeError):  # pragma: no cover - depends on the installed wasmtime
    FAST_PATH_AVAILABLE = False


class HostFault:
    """The exception a host function of one instance raised during the current call."""

    __slots__ = ("error",)

    def __init__(self) -> None:
        self.error: BaseException | None = None

    def wrap(self, func: Callable[..., Any]) -> Callable[..., Any]:
        """`func`, recording any exception it raises before wasmtime turns it into a trap."""
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
        if error is not None and FAST_PATH_AVAILABLE and _wfunc.LAST_EXCEPTION is error:
            _wfunc.LAST_EXCEPTION = None  # ours: never leave it for another instance to raise
        return error


def make_export_caller(
    store: wasmtime.Store, func: wasmtime.Func, result: str | None, fault: HostFault, fast: bool = True
) -> Callable[[int], Any]:
    """A callable `(deadline_ticks) -> int | None` that runs the export once.

    `result` is the export's single result type ("i32", "i64") or None.
    """
    if fast and FAST_PATH_AVAILABLE:
        return _fast_caller(store, func, result, fault)
    return _public_caller(store, func, fault)


def _public_caller(store: wasmtime.Store, func: wasmtime.Func, fault: HostFault) -> Callable[[int], Any]:
    def call(ticks: int) -> Any:
        store.set_epoch_deadline(ticks)
        try:
            return func(store)
        except BaseException:
            error = fault.take()
            if error is not None:
                raise error from None
            raise

    return call


def _fast_caller(store: wasmtime.Store, func: wasmtime.Func, result: str | None,
                 fault: HostFault) -> Callable[[int], Any]:
    context = store._context()
    func_ref = ctypes.byref(func._func)
    values = (_RAW * 1)()
    slot = values[0]
    call_unchecked = _CALL_UNCHECKED
    set_deadline = _SET_DEADLINE
    trap_ptr = _TRAP_PTR
    byref = ctypes.byref
    # Keep what the pointers point into alive as long as the caller.
    keep = (store, func, values)

    def fail(error: Any, trap: Any) -> None:
        raised = fault.take()
        if trap:
            trap_obj = _Trap._from_ptr(trap)
            raise (raised or trap_obj) from None
        if raised is not None:
            raise raised from None
        raise wasmtime.WasmtimeError._from_ptr(error)

    if result == "i32":
        def call(ticks: int) -> Any:
            set_deadline(context, ticks)
            trap = trap_ptr()
            error = call_unchecked(context, func_ref, values, 1, byref(trap))
            if error or trap:
                fail(error, trap)
            return slot.i32
    elif result == "i64":
        def call(ticks: int) -> Any:
            set_deadline(context, ticks)
            trap = trap_ptr()
            error = call_unchecked(context, func_ref, values, 1, byref(trap))
            if error or trap:
                fail(error, trap)
            return slot.i64
    else:
        def call(ticks: int) -> Any:
            set_deadline(context, ticks)
            trap = trap_ptr()
            error = call_unchecked(context, func_ref, values, 1, byref(trap))
            if error or trap:
                fail(error, trap)
            return None

    call.keep = keep  # type: ignore[attr-defined]
    return call

"""Every reach into wasmtime-py's private API, and the one check that it still works.

This module owns the project's only uses of names wasmtime-py does not publish (its
`_ffi` library and structures, `LAST_EXCEPTION`, `Trap._from_ptr`,
`WasmtimeError._from_ptr`, `Store._context()`, `Memory._memory`, `Func._func`, and
CPython's `ctypes._memmove_addr`), and its own ctypes prototypes of wasmtime C API
functions on plain addresses. They serve the fast paths of `actors.fast_call` and
`actors.guest_memory`, and the raw floor of `adapters.benchmarks.micro`.

`internals()` is the one check, run once a process when the first instance is built
(never during imports: wasmtime installs its trap handlers with the first engine):
`probe()` tries every accessor in a throwaway store and gives an `Internals`, or None
if any is missing or misbehaves; then every caller takes the public API, slower but
with the same results. `docs/packaging.md` ("Supported dependency versions") says which
wasmtime versions are checked and how a new one is admitted.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import wasmtime

_VP = ctypes.c_void_p

#: A host function for `Internals.define_unchecked`: (env, caller, address of the value
#: array, its length) -> the address of a trap, or 0.
UncheckedCallback = Callable[[Any, Any, int, int], int]
#: An epoch deadline callback for `Internals.set_deadline_callback`: (context, env,
#: address of the next deadline's delta (u64), address of the update kind (u8)) -> the
#: address of an error that stops the guest, or 0.
DeadlineCallback = Callable[[Any, Any, int, int], int]

_UNCHECKED_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_size_t, _VP, _VP, _VP, ctypes.c_size_t)
_DEADLINE_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_size_t, _VP, _VP, _VP, _VP)
_FINALIZER = ctypes.CFUNCTYPE(None, _VP)

#: The value slot the raw callbacks and unchecked calls assume (an i32 or i64 at offset 0).
VALUE_SIZE = 16


@dataclass(frozen=True, slots=True)
class Internals:
    """The accessors of the fast paths, each checked by `probe()`.

    The prototypes take and return plain addresses (ints; None is a null pointer), so a
    call converts nothing: fetch one once, outside a loop, and call it. The methods are
    for setting things up, not for hot loops.
    """

    #: `wasmtime_val_raw_t`: the 16-byte slot of an unchecked call's value array
    #: (a ctypes union with fields `i32` and `i64`).
    val_raw: Any
    #: (context, func handle, values, value count, address of a trap slot) -> error or None.
    func_call_unchecked: Callable[..., int | None]
    #: (context, ticks): arm the store's epoch deadline `ticks` from now.
    set_epoch_deadline: Callable[[int | None, int], None]
    #: (message) -> a new `wasmtime_error_t`, for a deadline callback to stop a guest.
    error_new: Callable[[bytes], int | None]
    #: (message, its length) -> a new `wasm_trap_t`, for a raw host function to trap.
    trap_new: Callable[[bytes, int], int | None]
    #: (context, memory handle) -> the memory's base; keeps the GIL.
    memory_data: Callable[[int | None, int], int | None]
    #: (context, memory handle) -> the memory's size in bytes; keeps the GIL.
    memory_data_size: Callable[[int | None, int], int]
    #: (destination, bytes, length): memmove that keeps the GIL (ctypes.memmove releases it).
    memmove: Callable[[int, bytes, int], int | None]
    _trap_pointer: Any
    _error_pointer: Any
    _define_func_unchecked: Callable[..., int | None]
    _store_epoch_deadline_callback: Callable[..., None]
    _host_exceptions: Any  # the module wasmtime._func

    def context_address(self, store: wasmtime.Store) -> int:
        """The address of the store's context (stable for the store's life)."""
        return ctypes.cast(store._context(), _VP).value or 0

    def func_address(self, func: wasmtime.Func) -> int:
        """The address of the function's handle (valid while `func` lives)."""
        return ctypes.addressof(func._func)

    def memory_address(self, memory: wasmtime.Memory) -> int | None:
        """The address of the memory's handle (valid while `memory` lives); None for a
        memory whose handle is not a plain structure (use the public API for it)."""
        handle = getattr(memory, "_memory", None)
        return ctypes.addressof(handle) if isinstance(handle, ctypes.Structure) else None

    def trap_from_address(self, address: int) -> wasmtime.Trap:
        """The `wasmtime.Trap` owning the `wasm_trap_t` at `address`."""
        return wasmtime.Trap._from_ptr(ctypes.cast(address, self._trap_pointer))

    def error_from_address(self, address: int) -> wasmtime.WasmtimeError:
        """The `wasmtime.WasmtimeError` (an `ExitTrap` for a WASI exit) owning the error at `address`."""
        return wasmtime.WasmtimeError._from_ptr(ctypes.cast(address, self._error_pointer))

    def forget_host_exception(self, error: BaseException) -> None:
        """Clear wasmtime-py's module-global record of the exception a host function
        raised, if it is `error`: it is ours, never to be raised for another instance."""
        if self._host_exceptions.LAST_EXCEPTION is error:
            self._host_exceptions.LAST_EXCEPTION = None

    def define_unchecked(self, linker: wasmtime.Linker, module: str, name: str, functype: wasmtime.FuncType,
                         callback: UncheckedCallback) -> object:
        """Define `callback` as the host function `module`.`name` of `linker`, called with
        the raw value array. Returns what must live as long as the linker's instances."""
        raw = _UNCHECKED_CALLBACK(callback)
        module_bytes, name_bytes = module.encode(), name.encode()
        error = self._define_func_unchecked(
            ctypes.cast(linker.ptr(), _VP).value, module_bytes, len(module_bytes), name_bytes,
            len(name_bytes), ctypes.cast(functype.ptr(), _VP).value, raw, None, _FINALIZER(0),
        )
        if error:
            raise self.error_from_address(error)
        return raw

    def set_deadline_callback(self, store: wasmtime.Store, callback: DeadlineCallback) -> object:
        """Have wasmtime call `callback` when the store's epoch deadline passes. Returns
        what must live as long as the store."""
        raw = _DEADLINE_CALLBACK(callback)
        self._store_epoch_deadline_callback(ctypes.cast(store.ptr(), _VP).value, raw, None, _FINALIZER(0))
        return raw


@functools.cache
def internals() -> Internals | None:
    """The accessors of wasmtime-py's private API, or None if any is missing or broken
    (then use the public API). Checked on the first call; every later call answers the same."""
    try:
        return probe()
    except Exception:
        return None


def require_internals() -> Internals:
    """`internals()`, for code built only on the fast path (its caller chose that path)."""
    found = internals()
    if found is None:
        raise RuntimeError("wasmtime-py's private API is unavailable here: use the public API path")
    return found


def probe() -> Internals:
    """Build every accessor and try each once; raise if a name is missing or one fails."""
    from wasmtime import _ffi, _func

    dll = _ffi.dll
    found = Internals(
        val_raw=_ffi.wasmtime_val_raw_t,
        func_call_unchecked=ctypes.CFUNCTYPE(_VP, _VP, _VP, _VP, ctypes.c_size_t, _VP)(
            ("wasmtime_func_call_unchecked", dll)),
        set_epoch_deadline=ctypes.CFUNCTYPE(None, _VP, ctypes.c_uint64)(
            ("wasmtime_context_set_epoch_deadline", dll)),
        error_new=ctypes.CFUNCTYPE(_VP, ctypes.c_char_p)(("wasmtime_error_new", dll)),
        trap_new=ctypes.CFUNCTYPE(_VP, ctypes.c_char_p, ctypes.c_size_t)(("wasmtime_trap_new", dll)),
        # The memory getters are trivial and never call back: PYFUNCTYPE keeps the GIL.
        memory_data=ctypes.PYFUNCTYPE(_VP, _VP, _VP)(("wasmtime_memory_data", dll)),
        memory_data_size=ctypes.PYFUNCTYPE(ctypes.c_size_t, _VP, _VP)(("wasmtime_memory_data_size", dll)),
        memmove=ctypes.PYFUNCTYPE(_VP, _VP, ctypes.c_char_p, ctypes.c_size_t)(
            ctypes._memmove_addr),  # type: ignore[attr-defined]
        _trap_pointer=ctypes.POINTER(_ffi.wasm_trap_t),
        _error_pointer=ctypes.POINTER(_ffi.wasmtime_error_t),
        _define_func_unchecked=ctypes.CFUNCTYPE(
            _VP, _VP, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t, _VP,
            _UNCHECKED_CALLBACK, _VP, _FINALIZER,
        )(("wasmtime_linker_define_func_unchecked", dll)),
        _store_epoch_deadline_callback=ctypes.CFUNCTYPE(None, _VP, _DEADLINE_CALLBACK, _VP, _FINALIZER)(
            ("wasmtime_store_epoch_deadline_callback", dll)),
        _host_exceptions=_func,
    )
    _try(found)
    return found


class _ProbeFailed(Exception):
    """An accessor exists but does not do what the fast paths rely on."""


def _expect(condition: bool, what: str) -> None:
    if not condition:
        raise _ProbeFailed(what)


def _try(found: Internals) -> None:
    """Use every accessor once, in a throwaway engine and store."""
    raw = found.val_raw
    _expect(hasattr(raw, "i32") and hasattr(raw, "i64") and ctypes.sizeof(raw) == VALUE_SIZE,
            "wasmtime_val_raw_t is not a 16-byte slot with i32 and i64")
    _expect(hasattr(found._host_exceptions, "LAST_EXCEPTION"), "wasmtime._func.LAST_EXCEPTION is gone")
    engine = wasmtime.Engine()
    store = wasmtime.Store(engine)
    context = found.context_address(store)
    _expect(context != 0, "Store._context() gave a null context")

    memory = wasmtime.Memory(store, wasmtime.MemoryType(wasmtime.Limits(1, 1)))
    handle = found.memory_address(memory)
    _expect(handle is not None, "Memory._memory is not a ctypes structure")
    assert handle is not None
    _expect(found.memory_data_size(context, handle) == memory.data_len(store), "wasmtime_memory_data_size")
    base = found.memory_data(context, handle)
    _expect(base == ctypes.addressof(memory.data_ptr(store).contents), "wasmtime_memory_data")
    assert base is not None
    found.memmove(base + 8, b"probe", 5)
    _expect(ctypes.string_at(base + 8, 5) == b"probe", "memmove")

    def double(_env: Any, _caller: Any, values: int, _count: int) -> int:
        slot = ctypes.c_int32.from_address(values)
        if slot.value < 0:
            message = b"probe trap"
            return found.trap_new(message, len(message)) or 0
        slot.value *= 2
        return 0

    linker = wasmtime.Linker(engine)
    i32 = wasmtime.ValType.i32()
    functype = wasmtime.FuncType([i32], [i32])
    keep = found.define_unchecked(linker, "probe", "double", functype, double)
    func = linker.get(store, "probe", "double")
    _expect(isinstance(func, wasmtime.Func), "the unchecked host function is not a Func")
    assert isinstance(func, wasmtime.Func)
    values = (raw * 1)()
    trap = _VP(None)
    args = (context, found.func_address(func), ctypes.addressof(values), 1, ctypes.addressof(trap))
    values[0].i32 = 21
    error = found.func_call_unchecked(*args)
    _expect(not error and not trap.value and values[0].i32 == 42, "wasmtime_func_call_unchecked")
    values[0].i32 = -1
    error = found.func_call_unchecked(*args)
    # With no wasm frame in between, wasmtime reports the host function's trap as an error.
    _expect(bool(error or trap.value), "a trap from an unchecked host function")
    stopped = found.trap_from_address(trap.value) if trap.value else found.error_from_address(error or 0)
    _expect("probe trap" in str(stopped), "a trap from an unchecked host function")
    address = found.trap_new(b"probe", 5)
    _expect(bool(address), "wasmtime_trap_new")
    assert address is not None
    trapped = found.trap_from_address(address)
    _expect(isinstance(trapped, wasmtime.Trap) and "probe" in trapped.message, "Trap._from_ptr")

    address = found.error_new(b"probe error")
    _expect(bool(address), "wasmtime_error_new")
    assert address is not None
    failure = found.error_from_address(address)
    _expect(isinstance(failure, wasmtime.WasmtimeError) and "probe error" in str(failure), "WasmtimeError._from_ptr")

    found.set_epoch_deadline(context, 1)
    keep_deadline = found.set_deadline_callback(store, lambda _context, _env, _delta, _kind: 0)
    del store, keep, keep_deadline  # the store before the callbacks it may call

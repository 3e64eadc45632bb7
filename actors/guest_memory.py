"""Bounds-checked access to one guest's linear memory.

This module owns the only code that reads or writes guest memory. Every (ptr, len)
a guest hands to a host function is checked against the memory's current size
before a byte moves; a bad one raises `GuestFault`, which the host function
turns into a trap of that call (the ABI: a pointer outside memory is a guest bug).
wasmtime-py's own `Memory.read` clamps silently and wraps negative offsets like a
Python slice, so it is not used.

Every access re-reads the memory's base and size (a guest may grow its memory in any
call). wasmtime-py's `Memory.data_ptr`/`data_len` wrap each C call in Python and
release the GIL around it, which costs a few microseconds and invites a GIL hand-off
on every host function call; when `actors.wasmtime_internals` finds wasmtime-py's
private bindings working, the two getters are called through its ctypes prototypes on
plain addresses that keep the GIL (they are trivial and never call back), as
`actors.fast_call` does for exports, and so is the copy of a host function's answer into
guest memory. `fast=False` keeps the public API (the before/after comparison).

See `docs/guest-authors.md` ("The buffer protocol").
"""

from __future__ import annotations

import ctypes
import struct

import wasmtime

from wasm_scheduler.actors.wasmtime_internals import internals

_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")


class GuestFault(Exception):
    """A guest broke the ABI inside a host call (a pointer outside its memory, a call out of place)."""


class GuestMemory:
    """The `memory` export of one instance, seen through one store."""

    __slots__ = ("_memory", "_store", "_context", "_raw", "_fast", "_data", "_data_size", "_memmove")

    def __init__(self, memory: wasmtime.Memory, store: wasmtime.Store, fast: bool = True) -> None:
        self._memory = memory
        self._store = store
        found = internals() if fast else None
        raw = found.memory_address(memory) if found is not None else None
        self._fast = raw is not None
        if found is not None and raw is not None:
            # Addresses of the store's context and of the memory's handle: stable for the
            # instance's life (this object keeps both alive).
            self._context = found.context_address(store)
            self._raw = raw
            # The prototypes, each read into a local before its call: `self._f(...)` would
            # be a slower, unspecialized method lookup in CPython.
            self._data, self._data_size, self._memmove = found.memory_data, found.memory_data_size, found.memmove

    @property
    def size(self) -> int:
        if self._fast:
            data_size = self._data_size
            return int(data_size(self._context, self._raw))
        return self._memory.data_len(self._store)

    def _address(self, ptr: int, length: int, what: str) -> int:
        # ptr and len arrive as signed i32; the guest means them unsigned.
        ptr &= 0xFFFF_FFFF
        length &= 0xFFFF_FFFF
        if self._fast:
            data_size, data = self._data_size, self._data
            size = data_size(self._context, self._raw)
            if ptr + length > size:
                raise GuestFault(
                    f"{what}: range [{ptr}, {ptr + length}) is outside guest memory of {size} bytes"
                )
            return int(data(self._context, self._raw) or 0) + ptr
        size = self._memory.data_len(self._store)
        if ptr + length > size:
            raise GuestFault(
                f"{what}: range [{ptr}, {ptr + length}) is outside guest memory of {size} bytes"
            )
        base = ctypes.addressof(self._memory.data_ptr(self._store).contents)
        return base + ptr

    def check(self, ptr: int, length: int, what: str) -> None:
        """Raise GuestFault unless [ptr, ptr+length) lies inside guest memory."""
        self._address(ptr, length, what)

    def check_read(self, ptr: int, length: int, what: str = "read") -> None:
        """Raise GuestFault exactly where `read` of the same range would, reading nothing
        (an empty range is never checked, as `read` returns b"" for it)."""
        if length & 0xFFFF_FFFF:
            self._address(ptr, length, what)

    def read(self, ptr: int, length: int, what: str = "read") -> bytes:
        length &= 0xFFFF_FFFF
        if length == 0:
            return b""
        return ctypes.string_at(self._address(ptr, length, what), length)

    def write(self, ptr: int, data: bytes, what: str = "write") -> None:
        if not data:
            return
        if self._fast and type(data) is bytes:
            memmove = self._memmove
            memmove(self._address(ptr, len(data), what), data, len(data))
            return
        ctypes.memmove(self._address(ptr, len(data), what), data, len(data))

    def write_u32(self, ptr: int, value: int, what: str = "u32") -> None:
        self.write(ptr, _U32.pack(value & 0xFFFF_FFFF), what)

    def write_u64(self, ptr: int, value: int, what: str = "u64") -> None:
        self.write(ptr, _U64.pack(value & 0xFFFF_FFFF_FFFF_FFFF), what)

    def read_u32(self, ptr: int, what: str = "u32") -> int:
        return int(_U32.unpack(self.read(ptr, 4, what))[0])

    def give(self, value: bytes, buf: int, buf_limit: int, what: str) -> int:
        """The ABI's buffer protocol.

        Empty value: write nothing, return 0. Larger than the buffer: write nothing,
        return its size so the guest can grow the buffer and ask again. Otherwise write
        it at `buf` and return its size.
        """
        size = len(value)
        if size == 0 or size > (buf_limit & 0xFFFF_FFFF):
            return size
        self.write(buf, value, what)
        return size

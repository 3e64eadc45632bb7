"""Bounds-checked access to one guest's linear memory.

This module owns the only code that reads or writes guest memory. Every (ptr, len)
a guest hands to a host function is checked against the memory's current size
before a byte moves; a bad one raises `GuestFault`, which the host function
turns into a trap of that call (the ABI: a pointer outside memory is a guest bug).
wasmtime-py's own `Memory.read` clamps silently and wraps negative offsets like a
Python slice, so it is not used.
"""

from __future__ import annotations

import ctypes
import struct

import wasmtime

_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")


class GuestFault(Exception):
    """A guest broke the ABI inside a host call (a pointer outside its memory, a call out of place)."""


class GuestMemory:
    """The `memory` export of one instance, seen through one store."""

    __slots__ = ("_memory", "_store")

    def __init__(self, memory: wasmtime.Memory, store: wasmtime.Store) -> None:
        self._memory = memory
        self._store = store

    @property
    def size(self) -> int:
        return self._memory.data_len(self._store)

    def _address(self, ptr: int, length: int, what: str) -> int:
        # ptr and len arrive as signed i32; the guest means them unsigned.
        ptr &= 0xFFFF_FFFF
        length &= 0xFFFF_FFFF
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

    def read(self, ptr: int, length: int, what: str = "read") -> bytes:
        length &= 0xFFFF_FFFF
        if length == 0:
            return b""
        return ctypes.string_at(self._address(ptr, length, what), length)

    def read_str(self, ptr: int, length: int, what: str = "string") -> str:
        """UTF-8 text; invalid bytes are replaced rather than trusted."""
        return self.read(ptr, length, what).decode("utf-8", errors="replace")

    def write(self, ptr: int, data: bytes, what: str = "write") -> None:
        if not data:
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

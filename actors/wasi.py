"""The WASI preview1 a guest sees: argv, a clock, randomness, captured output, nothing else.

This module owns the `wasi_snapshot_preview1` imports. TinyGo guests import a handful
of them (`fd_write`, `args_get`, `args_sizes_get`, `environ_get`, `environ_sizes_get`,
`clock_time_get`, `random_get`, `proc_exit`); they are implemented here with the ABI's
rules: argv exactly as configured, no environment, no preopened directories, no
network, and stdout/stderr captured into a per-instance buffer. Any other preview1
function a guest imports is given with the guest's own signature and answers ENOSYS,
so a guest that merely links it still loads. It is the runtime's own implementation
rather than wasmtime's WASI so that output is captured in memory with no temporary
files and no host resource is reachable.

See `docs/abi-notes.md` and `docs/guest-authors.md` ("Imports").
"""

from __future__ import annotations

import os
import struct
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import wasmtime

from wasm_scheduler.actors.guest_memory import GuestFault, GuestMemory
from wasm_scheduler.registry.guest_abi import WASI_SIGNATURES

ERRNO_SUCCESS = 0
ERRNO_BADF = 8
ERRNO_FAULT = 21
ERRNO_INVAL = 28
ERRNO_NOSYS = 52

#: Bytes of guest output kept per call; beyond that the rest is counted, not stored.
OUTPUT_LIMIT = 64 * 1024

#: Most iovecs one fd_write may pass (POSIX IOV_MAX is 1024).
MAX_IOVECS = 1024

class GuestExit(Exception):
    """The guest called `proc_exit`."""

    def __init__(self, code: int) -> None:
        super().__init__(f"guest exited with code {code}")
        self.code = code


@dataclass
class CapturedOutput:
    """stdout and stderr of one instance since the last `take`."""

    stdout: bytearray = field(default_factory=bytearray)
    stderr: bytearray = field(default_factory=bytearray)
    dropped: int = 0

    def append(self, fd: int, data: bytes) -> None:
        target = self.stdout if fd == 1 else self.stderr
        room = OUTPUT_LIMIT - len(target)
        if room > 0:
            target += data[:room]
        self.dropped += max(0, len(data) - max(room, 0))

    def take(self) -> tuple[str, str]:
        """The text written since the last take, then cleared."""
        out = self.stdout.decode("utf-8", errors="replace")
        err = self.stderr.decode("utf-8", errors="replace")
        self.stdout.clear()
        self.stderr.clear()
        self.dropped = 0
        return out, err


class Wasi:
    """The preview1 imports of one instance. `memory` is set once the instance exists."""

    def __init__(self, argv: Sequence[str], output: CapturedOutput) -> None:
        self.argv = [a.encode() + b"\0" for a in argv]
        self.output = output
        self.memory: GuestMemory | None = None

    def _mem(self) -> GuestMemory:
        if self.memory is None:
            raise GuestFault("WASI call before the instance's memory exists")
        return self.memory

    # --- the implemented functions ---------------------------------------------------

    def args_sizes_get(self, argc_ptr: int, size_ptr: int) -> int:
        mem = self._mem()
        mem.write_u32(argc_ptr, len(self.argv), "args_sizes_get")
        mem.write_u32(size_ptr, sum(len(a) for a in self.argv), "args_sizes_get")
        return ERRNO_SUCCESS

    def args_get(self, argv_ptr: int, buf_ptr: int) -> int:
        mem = self._mem()
        offset = buf_ptr & 0xFFFF_FFFF
        for i, arg in enumerate(self.argv):
            mem.write_u32(argv_ptr + 4 * i, offset, "args_get")
            mem.write(offset, arg, "args_get")
            offset += len(arg)
        return ERRNO_SUCCESS

    def environ_sizes_get(self, count_ptr: int, size_ptr: int) -> int:
        mem = self._mem()
        mem.write_u32(count_ptr, 0, "environ_sizes_get")
        mem.write_u32(size_ptr, 0, "environ_sizes_get")
        return ERRNO_SUCCESS

    def environ_get(self, environ_ptr: int, buf_ptr: int) -> int:
        return ERRNO_SUCCESS

    def clock_time_get(self, clock_id: int, precision: int, out_ptr: int) -> int:
        if clock_id == 0:
            now = time.time_ns()
        elif clock_id == 1:
            now = time.monotonic_ns()
        elif clock_id == 2:
            now = time.process_time_ns()
        elif clock_id == 3:
            now = time.thread_time_ns()
        else:
            return ERRNO_INVAL
        self._mem().write_u64(out_ptr, now, "clock_time_get")
        return ERRNO_SUCCESS

    def clock_res_get(self, clock_id: int, out_ptr: int) -> int:
        if not 0 <= clock_id <= 3:
            return ERRNO_INVAL
        self._mem().write_u64(out_ptr, 1000, "clock_res_get")
        return ERRNO_SUCCESS

    def random_get(self, buf: int, length: int) -> int:
        mem = self._mem()
        mem.check(buf, length, "random_get")  # before allocating what the guest asked for
        mem.write(buf, os.urandom(length & 0xFFFF_FFFF), "random_get")
        return ERRNO_SUCCESS

    def fd_write(self, fd: int, iovs: int, iovs_len: int, nwritten_ptr: int) -> int:
        if fd not in (1, 2):
            return ERRNO_BADF
        mem = self._mem()
        count = iovs_len & 0xFFFF_FFFF
        if count > MAX_IOVECS:
            return ERRNO_INVAL
        vectors = struct.unpack(f"<{2 * count}I", mem.read(iovs, 8 * count, "fd_write iovecs"))
        total = 0
        for i in range(0, 2 * count, 2):
            base, length = vectors[i], vectors[i + 1]
            mem.check(base, length, "fd_write data")
            kept = min(length, OUTPUT_LIMIT)  # never copy more than the buffer can keep
            self.output.append(fd, mem.read(base, kept, "fd_write data"))
            self.output.dropped += length - kept
            total += length
        mem.write_u32(nwritten_ptr, total, "fd_write")
        return ERRNO_SUCCESS

    def fd_close(self, fd: int) -> int:
        return ERRNO_BADF

    def fd_fdstat_get(self, fd: int, out_ptr: int) -> int:
        if fd not in (1, 2):
            return ERRNO_BADF
        # filetype CHARACTER_DEVICE (2), no flags, rights for fd_write (bit 6) only.
        self._mem().write(
            out_ptr,
            bytes([2, 0, 0, 0, 0, 0, 0, 0]) + (1 << 6).to_bytes(8, "little") + bytes(8),
            "fd_fdstat_get",
        )
        return ERRNO_SUCCESS

    def fd_prestat_get(self, fd: int, out_ptr: int) -> int:
        return ERRNO_BADF  # no preopened directories

    def sched_yield(self) -> int:
        return ERRNO_SUCCESS

    def proc_exit(self, code: int) -> None:
        raise GuestExit(code & 0xFFFF_FFFF)

    # --- linking -----------------------------------------------------------------------

    _SIGNATURES: Mapping[str, tuple[str, str]] = WASI_SIGNATURES

    def define(self, define: Callable[..., None], imports: Sequence[tuple[str, wasmtime.FuncType]]) -> None:
        """Define each preview1 function the module imports (names already validated).

        `define(module, name, params, results, func)` registers one host function
        (actors.fast_call.HostFunctionDefiner)."""
        letters = {"i": "i32", "I": "i64"}
        for name, import_type in imports:
            signature = self._SIGNATURES.get(name)
            if signature is not None:
                params = [letters[c] for c in signature[0]]
                results = [letters[c] for c in signature[1]]
                define("wasi_snapshot_preview1", name, params, results, getattr(self, name))
            else:
                define(
                    "wasi_snapshot_preview1", name,
                    [str(t) for t in import_type.params], [str(t) for t in import_type.results],
                    _unsupported(len(import_type.results)),
                )


def _unsupported(result_count: int) -> Callable[..., Any]:
    def call(*_args: Any) -> Any:
        return ERRNO_NOSYS if result_count == 1 else None

    return call

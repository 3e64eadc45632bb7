"""The per-node loop of Filter and Score, run inside wasm (fast path).

This module owns how an export called once per node (`filter`, `score`, `addpod`,
`removepod`) runs over a batch of nodes in one call from Python. Two small modules of
the runtime's own live in the guest's store: the *driver* (with the guest's memory as
its first memory) loops over the batch, calls the guest's export through its table and
stores each result; the *trampoline*, which the guest imports as `currentNodeName`,
answers from the batch's name table through the driver, and falls back to the host's
own `currentNodeName` outside a batch or for a buffer outside guest memory, so single
calls and faults behave as without the loop. `NodeLoop` has the driver's memory layout.
`docs/performance.md` ("The per-node loop in wasm") tells why.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Sequence
from typing import Any

import wasmtime

from wasm_scheduler.actors.fast_call import EpochDeadline, HostFault, PerNode, UncheckedCall
from wasm_scheduler.actors.guest_memory import GuestMemory

#: Exports the driver can loop over, and their slot in its table.
PER_NODE_SLOTS = {"score": 0, "filter": 1, "addpod": 2, "removepod": 3}

#: Names' bytes kept in the driver's memory before it starts over.
NAME_BYTES_LIMIT = 4 * 1024 * 1024
#: Names remembered before it starts over, when that is more than twice the batch's.
NAME_ENTRIES_MIN = 1024

_PAGE = 65536
_RESULTS_AT = 8

TRAMPOLINE_WAT = """
(module
  (type $buffer (func (param i32 i32) (result i32)))
  (table (export "slots") 1 1 funcref)
  (func (export "currentNodeName") (param i32 i32) (result i32)
    (call_indirect (type $buffer) (local.get 0) (local.get 1) (i32.const 0))))
"""

_RUN_WAT = """
  (func (export "run_{kind}") (param $slot i32) (param $names i32) (param $results i32)
      (param $i i32) (param $end i32) (param $stop i64) (result i32)
    (local $v i64)
    (global.set $names (local.get $names))
    (global.set $active (i32.const 1))
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get $end)))
        (i32.store $own (i32.const 0) (local.get $i))
        (local.set $v {call})
        (i64.store $own (i32.add (local.get $results) (i32.shl (local.get $i) (i32.const 3))) (local.get $v))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br_if $done (i64.ne (i64.and (local.get $v) (local.get $stop)) (i64.const 0)))
        (br $next)))
    (global.set $active (i32.const 0))
    (local.get $i))
"""

DRIVER_WAT = """
(module
  (type $buffer (func (param i32 i32) (result i32)))
  (type $result_i64 (func (result i64)))
  (type $result_i32 (func (result i32)))
  (import "guest" "memory" (memory $guest 0))
  (import "host" "currentNodeName" (func $host_current_node_name (type $buffer)))
  (memory $own (export "memory") 1)
  (table (export "exports") 4 4 funcref)
  ;; 1 while a batch runs; where the batch's name table starts
  (global $active (mut i32) (i32.const 0))
  (global $names (mut i32) (i32.const 0))

  (func (export "currentNodeName") (param $buf i32) (param $limit i32) (result i32)
    (local $entry i32) (local $len i32)
    (if (i32.eqz (global.get $active))
      (then (return (call $host_current_node_name (local.get $buf) (local.get $limit)))))
    (local.set $entry
      (i32.add (global.get $names) (i32.shl (i32.load $own (i32.const 0)) (i32.const 3))))
    (local.set $len (i32.load $own offset=4 (local.get $entry)))
    (if (i32.or (i32.eqz (local.get $len)) (i32.gt_u (local.get $len) (local.get $limit)))
      (then (return (local.get $len))))
    (if (i64.gt_u
          (i64.add (i64.extend_i32_u (local.get $buf)) (i64.extend_i32_u (local.get $len)))
          (i64.mul (i64.extend_i32_u (memory.size $guest)) (i64.const 65536)))
      (then (return (call $host_current_node_name (local.get $buf) (local.get $limit)))))
    (memory.copy $guest $own (local.get $buf) (i32.load $own (local.get $entry)) (local.get $len))
    (local.get $len))
""" + _RUN_WAT.format(kind="i64", call="(call_indirect (type $result_i64) (local.get $slot))") + _RUN_WAT.format(
    kind="i32", call="(i64.extend_i32_s (call_indirect (type $result_i32) (local.get $slot)))"
) + ")\n"


class NodeLoop:
    """The driver and trampoline of one instance, and the batches run through them.

    Made before the guest is instantiated (`NodeLoop(...)` links the trampoline and the
    host's fallback); `attach` completes it once the guest exists. A node costs a
    wasm-to-wasm call; every other host function still runs in Python, and the ones that
    need the node of the moment (a status reason, `currentNodeName` on its slow path)
    read its index from the driver's memory. Deadlines stay per node: `EpochDeadline`
    lets a batch run while the index moves. The driver stops early at a result the host
    asked it to stop at (Score stops at the first status that is not Success).

    The driver's memory: bytes [0, 4) the index of the node in progress; then the results
    (an i64 a node, i32 results sign-extended); then the batch's name table (u32 offset,
    u32 length a node); then the names' bytes, each distinct name written once and
    remembered, until they pass `NAME_BYTES_LIMIT` or twice the names of the batch at hand
    (at least `NAME_ENTRIES_MIN`) and are written afresh: an instance keeps no more names
    than its recent batches had, however many node names it has seen over its life."""

    def __init__(
        self,
        store: wasmtime.Store,
        linker: wasmtime.Linker,
        helper_module: Callable[[str, str], wasmtime.Module],
        define_fallback: Callable[[str, str], None],
        guest_imports_node_name: bool,
    ) -> None:
        self._store = store
        self._linker = linker
        self._driver_module = helper_module("node-loop-driver", DRIVER_WAT)
        self._trampoline_slots: wasmtime.Table | None = None
        define_fallback("host", "currentNodeName")
        if guest_imports_node_name:
            trampoline = linker.instantiate(store, helper_module("node-loop-trampoline", TRAMPOLINE_WAT))
            exports = trampoline.exports(store)
            func, slots = exports["currentNodeName"], exports["slots"]
            assert isinstance(func, wasmtime.Func) and isinstance(slots, wasmtime.Table)
            linker.define(store, "k8s.io/scheduler", "currentNodeName", func)
            self._trampoline_slots = slots
        self._own_memory: wasmtime.Memory | None = None
        self._memory: GuestMemory | None = None
        self._runs: dict[str, UncheckedCall] = {}
        self._deadline: EpochDeadline | None = None
        self._capacity = 0
        self._names_at = self._bytes_at = self._bytes_end = 0
        self._entries: dict[str, bytes] = {}

    def attach(self, guest_exports: Any, memory: wasmtime.Memory, exports: Sequence[str],
               fault: HostFault, deadline: EpochDeadline) -> None:
        """Instantiate the driver over the guest's memory and put `exports` in its table."""
        store = self._store
        self._linker.define(store, "guest", "memory", memory)
        driver = self._linker.instantiate(store, self._driver_module).exports(store)
        table, own_memory = driver["exports"], driver["memory"]
        assert isinstance(table, wasmtime.Table) and isinstance(own_memory, wasmtime.Memory)
        for name in exports:
            table.set(store, PER_NODE_SLOTS[name], guest_exports[name])
        if self._trampoline_slots is not None:
            self._trampoline_slots.set(store, 0, driver["currentNodeName"])
        self._own_memory = own_memory
        self._memory = GuestMemory(own_memory, store)
        params = ("i32", "i32", "i32", "i32", "i32", "i64")
        for kind in ("i64", "i32"):
            func = driver[f"run_{kind}"]
            assert isinstance(func, wasmtime.Func)
            self._runs[kind] = UncheckedCall(store, func, params, "i32", fault)
        self._deadline = deadline

    def detach(self, linker: wasmtime.Linker) -> None:
        """Give up the loop (the driver could not be made): the guest's `currentNodeName`
        goes straight to the host's."""
        if self._trampoline_slots is not None:
            fallback = linker.get(self._store, "host", "currentNodeName")
            self._trampoline_slots.set(self._store, 0, fallback)

    def node_index(self) -> int:
        """The index in the running batch of the node in progress."""
        assert self._memory is not None
        return self._memory.read_u32(0)

    def run(self, ctx: Any, names: Sequence[str], stop_mask: int) -> PerNode | None:
        """Call ctx.export once per name, in wasm; None if the names do not fit (the
        caller then loops itself). Never raises for a guest's fault: it ends the run."""
        count = len(names)
        if count == 0:
            return PerNode(array("q"), {})
        if not self._write_names(names):
            return None
        assert self._memory is not None and self._deadline is not None
        run = self._runs["i64" if ctx.export == "score" else "i32"]
        reasons: dict[int, str] = {}
        ctx.node_index, ctx.batch_names, ctx.batch_reasons = self.node_index, names, reasons
        error: BaseException | None = None
        self._deadline.begin_batch(self.node_index)
        try:
            done = run(PER_NODE_SLOTS[ctx.export], self._names_at, _RESULTS_AT, 0, count, stop_mask)
        except BaseException as exc:
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            error, done = exc, self.node_index()  # the node that failed has no result
        finally:
            self._deadline.end_batch()
            ctx.node_index = ctx.batch_names = ctx.batch_reasons = None
        values = array("q", self._memory.read(_RESULTS_AT, 8 * done) if done else b"")
        if reasons:
            reasons = {i: text for i, text in reasons.items() if i < done and values[i]}
        return PerNode(values, reasons, error)

    # --- the name table ---------------------------------------------------------------

    def _write_names(self, names: Sequence[str]) -> bool:
        assert self._memory is not None
        if len(names) > self._capacity:
            self._layout(len(names))
            if not self._room(self._bytes_at):
                self._capacity = 0
                return False
        entries = self._entries
        try:
            table = b"".join(map(entries.__getitem__, names))
        except KeyError:
            if not self._remember(names):
                return False
            entries = self._entries
            table = b"".join(map(entries.__getitem__, names))
        self._memory.write(self._names_at, table)
        return True

    def _layout(self, count: int) -> None:
        """Room for `count` nodes a batch; the names are written afresh after it."""
        self._capacity = max(count, 2 * self._capacity, 256)
        self._names_at = _RESULTS_AT + 8 * self._capacity
        self._bytes_at = self._names_at + 8 * self._capacity
        self._bytes_end = self._bytes_at
        self._entries = {}

    def _remember(self, names: Sequence[str]) -> bool:
        """Write the names not yet in the driver's memory; False if memory cannot hold them."""
        assert self._memory is not None
        entries = self._entries
        new = {name: name.encode() for name in names if name not in entries}
        size = sum(len(data) for data in new.values())
        if (self._bytes_end + size - self._bytes_at > NAME_BYTES_LIMIT
                or len(entries) + len(new) > max(NAME_ENTRIES_MIN, 2 * len(names))):
            self._bytes_end, entries = self._bytes_at, {}
            self._entries = entries
            new = {name: name.encode() for name in names}
            size = sum(len(data) for data in new.values())
        if not self._room(self._bytes_end + size):
            return False
        blob = b"".join(new.values())
        self._memory.write(self._bytes_end, blob)
        at = self._bytes_end
        for name, data in new.items():
            entries[name] = (at | len(data) << 32).to_bytes(8, "little")
            at += len(data)
        self._bytes_end = at
        return True

    def _room(self, end: int) -> bool:
        assert self._memory is not None and self._own_memory is not None
        size = self._memory.size
        if end <= size:
            return True
        try:
            self._own_memory.grow(self._store, -(-(end - size) // _PAGE))
        except wasmtime.WasmtimeError:
            return False
        return True

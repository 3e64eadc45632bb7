"""Micro-figures of the guest host, each next to the floor it is judged against.

This module owns the small measurements of `wasm-scheduler bench`: host overhead per
export call next to the raw floor (the same no-op export called straight through
wasmtime's C API via ctypes, in the same process, on the same instance), both per node
of a Filter (the per-node loop runs in wasm) and for one call on its own, the host
function round trip, resident memory per idle instance next to its linear memory,
and plugin load time cold and with the compiled-module cache. Every figure is
measured in the same run as its baseline; none is asserted anywhere.

See `docs/performance.md` ("How to measure").
"""

from __future__ import annotations

import ctypes
import gc
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from wasm_scheduler.actors.guest_instance import GuestInstance
from wasm_scheduler.actors.wasmtime_internals import internals
from wasm_scheduler.adapters.wasm_plugin import WasmPlugin
from wasm_scheduler.registry.compiler import GuestCompiler
from wasm_scheduler.registry.config import PluginConfig
from wasm_scheduler.vocabulary import EmptyHandle

#: A guest whose filter does nothing and whose prescore calls get_config N times.
NOOP_GUEST = """
(module
  (import "k8s.io/scheduler" "get_config" (func $get_config (param i32 i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "filter") (result i32) (i32.const 0))
  (func (export "score") (result i64) (i64.const 0))
  (func (export "prescore") (result i32)
    (local $i i32)
    (block $done (loop $next
      (br_if $done (i32.ge_u (local.get $i) (i32.load (i32.const 0))))
      (drop (call $get_config (i32.const 64) (i32.const 64)))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $next)))
    (i32.const 0)))
"""


def _best(samples: int, run: Callable[[], float]) -> float:
    """The median of `samples` runs (each returns a per-operation time)."""
    return statistics.median(run() for _ in range(samples))


def call_overhead(compiler: GuestCompiler, nodes: int = 2000, samples: int = 9) -> dict[str, float]:
    """Per export call, in us: through the host (Filter over `nodes`: per node), one
    export call on its own through the host's caller (`single`), and the raw floor."""
    guest = compiler.compile("noop", "noop.wat", NOOP_GUEST.encode())
    inst = GuestInstance(guest, PluginConfig("noop", "noop.wat"), "noop-bench")
    names = [f"node-{i}" for i in range(nodes)]
    pod = {"metadata": {"name": "bench", "namespace": "default", "uid": "bench"}}
    handle = EmptyHandle()
    caller = inst._funcs["filter"]  # the benchmark reaches into the instance on purpose
    ticks = 1 << 20

    def host() -> float:
        started = time.perf_counter()
        inst.filter(pod, names, handle)
        return (time.perf_counter() - started) / nodes * 1e6

    def single() -> float:
        started = time.perf_counter()
        for _ in names:
            caller(ticks)
        return (time.perf_counter() - started) / nodes * 1e6

    floor = _floor_caller(inst)

    def raw() -> float:
        inst._store.set_epoch_deadline(1 << 40)  # the host's calls re-arm their own deadline
        started = time.perf_counter()
        for _ in names:
            floor()
        return (time.perf_counter() - started) / nodes * 1e6

    host(), single(), raw()  # warm up
    result = {"host": round(_best(samples, host), 3), "single": round(_best(samples, single), 3),
              "floor": round(_best(samples, raw), 3)}
    result["ratio"] = round(result["host"] / result["floor"], 2)
    result["single_ratio"] = round(result["single"] / result["floor"], 2)
    result["fast_path"] = compiler.fast_calls and internals() is not None
    return result


def _floor_caller(inst: GuestInstance) -> Callable[[], Any]:
    """The no-op `filter` of `inst`, called through wasmtime's C API with ctypes, nothing else."""
    found = internals()
    if found is None:
        raise RuntimeError("the raw floor needs wasmtime-py's private bindings, which this wasmtime lacks")
    store = inst._store  # the benchmark reaches into the instance on purpose
    func = inst._funcs["filter"].func
    call = found.func_call_unchecked
    context = found.context_address(store)
    func_addr = found.func_address(func)
    values = (found.val_raw * 1)()
    trap = ctypes.c_void_p(None)
    values_addr, trap_addr = ctypes.addressof(values), ctypes.addressof(trap)

    def floor() -> Any:
        return call(context, func_addr, values_addr, 1, trap_addr)

    floor.keep = (store, func, values, trap)  # type: ignore[attr-defined]
    return floor


def host_function_round_trip(compiler: GuestCompiler, calls: int = 20000, samples: int = 7) -> float:
    """us per host function call (guest -> Python -> guest), loop cost subtracted."""
    guest = compiler.compile("noop", "noop.wat", NOOP_GUEST.encode())
    inst = GuestInstance(guest, PluginConfig("noop", "noop.wat"), "noop-hostfn")
    pod = {"metadata": {"name": "bench"}}
    handle = EmptyHandle()

    def run(n: int) -> float:
        inst.memory.write_u32(0, n)
        started = time.perf_counter()
        inst.prescore(pod, (), handle)
        return time.perf_counter() - started

    run(100)
    with_calls = _best(samples, lambda: run(calls))
    without = _best(samples, lambda: run(0))
    return round(max(with_calls - without, 0.0) / calls * 1e6, 3)


def _rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * _page_size()


def _page_size() -> int:
    import os

    return os.sysconf("SC_PAGE_SIZE")


def memory_per_instance(compiler: GuestCompiler, guest_path: Path, instances: int = 40) -> dict[str, float]:
    """Resident memory added by each idle instance (actor included) and its linear memory."""
    config = PluginConfig("mem", str(guest_path))
    guest = compiler.load(config)
    with WasmPlugin(guest, config) as plugin:
        # Hold `instances` pods in binding (as the extender does after prioritize, whatever
        # the guest exports) so the pool must start that many instances.
        pods = [{"metadata": {"name": f"m{i}", "namespace": "bench", "uid": f"m{i}"}} for i in range(instances)]
        plugin.pre_filter(None, pods[0])
        plugin.hold_for_binding(pods[0])
        gc.collect()
        before = _rss_bytes()
        for pod in pods[1:]:
            plugin.pre_filter(None, pod)
            plugin.hold_for_binding(pod)
        for pod in pods:
            plugin.post_bind(None, pod, "n")
        counts = plugin.counts()
        gc.collect()
        after = _rss_bytes()
        added = counts.started - 1
        linear = plugin._first_instance().linear_memory_bytes
    return {
        "rss_per_instance_mib": round((after - before) / max(added, 1) / 2**20, 3),
        "linear_memory_mib": round(linear / 2**20, 3),
        "instances": added,
    }


def load_time(guest_path: Path, samples: int = 5) -> dict[str, float]:
    """ms to load a plugin (fetch, compile or reuse, validate, start its first instance)."""
    config = PluginConfig("load", str(guest_path))

    def load(cache_dir: Path | None) -> float:
        with GuestCompiler(cache_dir=cache_dir) as compiler:
            started = time.perf_counter()
            with WasmPlugin.load(config, compiler):
                return (time.perf_counter() - started) * 1000

    with tempfile.TemporaryDirectory() as tmp:
        cold = []
        for i in range(samples):
            cold.append(load(Path(tmp) / f"cold-{i}"))  # a fresh, empty cache every time
        load(Path(tmp) / "warm")  # fills the cache
        cached = [load(Path(tmp) / "warm") for _ in range(samples)]
    return {"cold": round(statistics.median(cold), 2), "cached": round(statistics.median(cached), 2)}

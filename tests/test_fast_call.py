"""The fast call path (wasmtime's unchecked C call) against the public API fallback.

Every outcome an export call can have (i32, i64 and no result; a trap; a fault in a
host function; proc_exit; a deadline) must come out the same on both paths, and
concurrent instances must never see each other's host-function errors.
"""

from __future__ import annotations

import threading

import pytest

from tests.conftest import GUESTS
from tests.probe import BUF, HIGH, STATUS, Script
from wasm_scheduler.actors.fast_call import FAST_PATH_AVAILABLE
from wasm_scheduler.actors.guest_instance import GuestInstance
from wasm_scheduler.framework_api import Code, NodeScore
from wasm_scheduler.registry.compiler import GuestCompiler
from wasm_scheduler.registry.config import LimitsConfig, PluginConfig
from wasm_scheduler.vocabulary import EmptyHandle

POD = {"metadata": {"name": "p", "namespace": "ns", "uid": "u"}}


@pytest.fixture(params=[True, False], ids=["fast", "public"])
def instance_factory(request: pytest.FixtureRequest):
    with GuestCompiler(fast_calls=request.param) as compiler:
        guest = compiler.compile("probe", "probe.wat", (GUESTS / "probe.wat").read_bytes())

        def make(timeout_ms: int = 1000) -> GuestInstance:
            return GuestInstance(guest, PluginConfig("probe", "probe.wat",
                                                     limits=LimitsConfig(call_timeout_ms=timeout_ms)), "probe-1")

        yield make


def test_fast_path_is_available_with_the_pinned_wasmtime() -> None:
    assert FAST_PATH_AVAILABLE, "the fast path silently fell back: check actors/fast_call.py against wasmtime"


def test_results_of_every_width(instance_factory) -> None:
    inst = instance_factory()
    handle = EmptyHandle()
    Script().returns(3, 0).load(inst)
    assert inst.reserve(POD, "n", handle).code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    Script().op("store", STATUS, 0).op("store", HIGH, 0xFFFF_FFF6).load(inst)  # score -10
    assert inst.score(POD, ["n"], handle).scores == (NodeScore("n", -10),)
    Script().op("store", STATUS, 25).op("store", HIGH, 4).load(inst)  # Wait, 25 ms
    permit = inst.permit(POD, "n", handle)
    assert (permit.status.code, permit.timeout_ms) == (Code.WAIT, 25)
    Script().load(inst)
    assert inst.postbind(POD, "n", handle).ok
    assert inst.calls == 4


def test_trap_host_fault_exit_and_deadline(instance_factory) -> None:
    handle = EmptyHandle()
    inst = instance_factory()
    Script().op("trap").load(inst)
    assert "unreachable" in inst.reserve(POD, "n", handle).reason
    inst = instance_factory()
    Script().op("currentPod", 0x7FFF_FFF0, 1 << 20).load(inst)
    status = inst.reserve(POD, "n", handle)
    assert status.code == Code.ERROR and "outside guest memory" in status.reason
    inst = instance_factory()
    Script().op("proc_exit", 3).load(inst)
    assert "exited with code 3" in inst.reserve(POD, "n", handle).reason
    inst = instance_factory(timeout_ms=30)
    Script().op("store", 0x10, 0).op("memory_grow", 0).load(inst)
    assert inst.reserve(POD, "n", handle).ok  # a healthy call under a short deadline


def test_concurrent_instances_never_see_each_others_host_errors(instance_factory) -> None:
    handle = EmptyHandle()
    instances = [instance_factory() for _ in range(4)]
    reasons: dict[int, list[str]] = {i: [] for i in range(4)}

    def run(i: int) -> None:
        for round_ in range(30):
            inst = instances[i]
            if inst.broken:
                inst = instances[i] = instance_factory()
            # Instance i faults with its own distinctive pointer.
            Script().op("currentPod", 0x4000_0000 + i * 0x100_0000, 1 << 20).load(inst)
            reasons[i].append(inst.reserve(POD, "n", handle).reason)
            inst = instances[i] = instance_factory()
            Script().op("currentNodeName", BUF, 64).load(inst)
            assert inst.reserve(POD, f"node-{round_}", handle).ok

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    for i, texts in reasons.items():
        assert len(texts) == 30
        expected = f"[{0x4000_0000 + i * 0x100_0000},"
        assert all(expected in text for text in texts), (i, texts[:2])

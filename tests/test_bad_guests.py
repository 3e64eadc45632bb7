"""Guests that misbehave: traps, exits, bad pointers, greedy memory; the host stays up.

A trap in any export is an Error status naming the export and carrying the guest's
stderr; the instance is then discarded and answers Error without running guest code.
A trap or a non-zero exit in `_start` fails the load. Through actors, one broken
instance does not disturb another.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from typing import Any

import pykka
import pytest

from tests.conftest import wat_guest
from tests.probe import (
    CALLS,
    EXPORT_IDS,
    LAST_EXPORT,
    RESULTS,
    SCRIPT,
    ExportInputs,
    Script,
    results,
    status_of,
    word,
)
from wasm_scheduler.actors.guest_actor import Describe, GuestActor, InstanceBroken, InstanceInfo, Invoke
from wasm_scheduler.actors.guest_instance import GuestInstance
from wasm_scheduler.actors.kube.wire_cache import WireCache
from wasm_scheduler.framework_api import (
    DEFAULT_CLUSTER_EVENTS,
    Code,
    FilterResult,
    NodeScore,
    NormalizeScoreResult,
    PermitResult,
    PostFilterResult,
    PreFilterResult,
    ScoreResult,
    Status,
)
from wasm_scheduler.registry.compiler import CompiledGuest, GuestCompiler
from wasm_scheduler.registry.config import LimitsConfig, PluginConfig
from wasm_scheduler.registry.errors import GuestLoadError
from wasm_scheduler.vocabulary import EmptyHandle

POD = {"metadata": {"name": "web-0", "namespace": "shop", "uid": "uid-web-0"},
       "spec": {"containers": [{"name": "web", "image": "nginx:1.25"}]}}
TARGET = {"metadata": {"name": "db-0", "namespace": "shop", "uid": "uid-db-0"}}
NODES = ["node-1", "node-2", "node-3"]
SCORES = [NodeScore("node-1", 1), NodeScore("node-2", 2)]
INPUTS = ExportInputs(POD, TARGET, nodes=NODES, scores=SCORES)
BAD = 0xFFFF0000
UNREACHABLE = "wasm `unreachable` instruction executed"


def stderr_then(script: Script, text: bytes) -> Script:
    """fd_write `text` to stderr."""
    iov = struct.pack("<II", *script.put(text))
    ptr, _ = script.put(iov)
    return script.op("fd_write", 2, ptr, 1, 0x1000)


# --- a trap in each export --------------------------------------------------------------------

@pytest.mark.parametrize("export", list(EXPORT_IDS))
def test_trap_in_each_export(export: str, make_instance: Callable[..., GuestInstance],
                             handle: EmptyHandle) -> None:
    inst = make_instance()
    script = stderr_then(Script(), f"panic: runtime error in {export}\n\ngoroutine 1 [running]:\n".encode())
    script.op("trap").returns(0).load(inst)
    result = INPUTS.call(inst, export, handle)
    status = status_of(result)
    assert status.code == Code.ERROR
    assert status.plugin == "probe"
    assert status.reason == (f"wasm plugin probe: trap in {export}: wasm trap: {UNREACHABLE}; "
                             f"stderr: panic: runtime error in {export}\n\ngoroutine 1 [running]:")
    assert inst.broken == status.reason
    assert word(inst, LAST_EXPORT) == EXPORT_IDS[export]
    # the shape of the failed result
    if export == "filter":
        assert result.statuses == tuple((n, status) for n in NODES)  # every node gets the error
        assert inst.calls == 1  # the first node's call trapped; the others never ran
    elif export == "score":
        assert result == ScoreResult(status)
    elif export == "prefilter":
        assert result == PreFilterResult(status, None)
    elif export == "postfilter":
        assert result == PostFilterResult(status)
    elif export == "normalizescore":
        assert result == NormalizeScoreResult(status)
    elif export == "permit":
        assert result == PermitResult(status, 0)
    elif export == "enqueue":
        assert result == (DEFAULT_CLUSTER_EVENTS, status)
    # every later call answers Error without running guest code
    runs, calls = word(inst, CALLS), inst.calls
    Script().returns(0).load(inst)
    for later in EXPORT_IDS:
        again = status_of(INPUTS.call(inst, later, handle))
        assert again == Status(
            Code.ERROR,
            f"wasm plugin probe: instance probe-test is discarded (cannot run {later}): {status.reason}",
            "probe",
        )
    assert (word(inst, CALLS), inst.calls) == (runs, calls)
    assert word(inst, LAST_EXPORT) == EXPORT_IDS[export]


def test_trap_on_the_second_node_of_a_filter(make_instance: Callable[..., GuestInstance],
                                             handle: EmptyHandle) -> None:
    """node_digit rewrites the opcode of the next op: 'L' - '0' = 28, the trap op."""
    inst = make_instance()
    Script().op("node_digit", SCRIPT + 4 + 24).op("store", 0x30, 0).load(inst)
    res = inst.filter(POD, ["node-0", "node-L", "node-0"], handle)
    reason = f"wasm plugin probe: trap in filter: wasm trap: {UNREACHABLE}"
    assert res.statuses == (
        ("node-0", Status(Code.SUCCESS, "", "probe")),
        ("node-L", Status(Code.ERROR, reason, "probe")),
        ("node-0", Status(Code.ERROR, reason, "probe")),
    )
    assert inst.calls == 2 == word(inst, CALLS)
    assert inst.broken == reason


def test_proc_exit_during_an_export_is_an_error(make_instance: Callable[..., GuestInstance],
                                                handle: EmptyHandle) -> None:
    for export, code in (("prefilter", 0), ("score", 2), ("postbind", 1), ("enqueue", 0)):
        inst = make_instance()
        script = stderr_then(Script(), b"exiting\n")
        script.op("proc_exit", code).returns(0).load(inst)
        status = status_of(INPUTS.call(inst, export, handle))
        assert status == Status(
            Code.ERROR,
            f"wasm plugin probe: trap in {export}: guest exited with code {code}; stderr: exiting",
            "probe",
        ), export
        assert inst.broken


def test_guest_store_outside_its_memory(make_instance: Callable[..., GuestInstance],
                                        handle: EmptyHandle) -> None:
    inst = make_instance()
    Script().op("store", BAD, 1).load(inst)
    status = inst.reserve(POD, "node-1", handle)
    assert status.code == Code.ERROR
    assert status.reason.startswith("wasm plugin probe: trap in reserve: ")
    assert "out of bounds memory access" in status.reason
    assert inst.broken


def test_guest_passes_a_pointer_outside_its_memory(make_instance: Callable[..., GuestInstance],
                                                   handle: EmptyHandle) -> None:
    inst = make_instance()
    Script().op("currentPod", BAD, 0x10000).load(inst)
    status = inst.prefilter(POD, handle).status
    assert status.code == Code.ERROR
    assert status.reason.startswith("wasm plugin probe: trap in prefilter: currentPod: range [4294901760, ")
    assert status.reason.endswith(") is outside guest memory of 131072 bytes")
    # the host is fine: another instance of the same guest works
    other = make_instance()
    Script().returns(2).load(other)
    assert other.reserve(POD, "node-1", handle) == Status(Code.UNSCHEDULABLE, "", "probe")


# --- memory ----------------------------------------------------------------------------------

def test_memory_grow_beyond_the_wasm_limit_fails_inside_the_guest(
    make_instance: Callable[..., GuestInstance], handle: EmptyHandle
) -> None:
    inst = make_instance()
    Script().op("memory_grow", 70_000).op("memory_grow", 1).op("memory_grow", 0).returns(0).load(inst)
    assert inst.reserve(POD, "node-1", handle) == Status(Code.SUCCESS, "", "probe")
    assert results(inst, 3) == [-1, 2, 3]
    assert inst.linear_memory_bytes == 3 * 65536
    assert not inst.broken


def test_memory_grow_beyond_the_store_limit_fails_inside_the_guest(
    make_instance: Callable[..., GuestInstance], handle: EmptyHandle
) -> None:
    inst = make_instance(limits=LimitsConfig(memory_limit_mib=1))  # 16 pages; the probe has 2
    Script().op("memory_grow", 14).op("memory_grow", 1).op("memory_grow", 0).returns(0).load(inst)
    assert inst.reserve(POD, "node-1", handle) == Status(Code.SUCCESS, "", "probe")
    assert results(inst, 3) == [2, -1, 16]
    assert inst.linear_memory_bytes == 1024 * 1024
    assert not inst.broken
    Script().returns(3).load(inst)
    assert inst.reserve(POD, "node-1", handle).code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE


def test_memory_grow_beyond_a_declared_maximum(compiler: GuestCompiler,
                                               make_instance: Callable[..., GuestInstance],
                                               handle: EmptyHandle) -> None:
    guest = wat_guest(compiler, "bounded", """
    (module
      (memory (export "memory") 1 2)
      (func (export "filter") (result i32)
        (i32.store (i32.const 0) (memory.grow (i32.const 1)))
        (i32.store (i32.const 4) (memory.grow (i32.const 1)))
        (i32.const 0)))
    """)
    inst = make_instance(guest)
    assert inst.filter(POD, ["node-1"], handle).statuses[0][1] == Status(Code.SUCCESS, "", "bounded")
    assert struct.unpack("<ii", inst.memory.read(0, 8)) == (1, -1)
    assert inst.linear_memory_bytes == 2 * 65536


def test_a_guest_that_never_returns_meets_the_call_deadline(
    compiler: GuestCompiler, make_instance: Callable[..., GuestInstance], handle: EmptyHandle
) -> None:
    guest = wat_guest(compiler, "spinner", """
    (module
      (memory (export "memory") 1)
      (func (export "filter") (result i32) (loop $forever (br $forever)) (i32.const 0)))
    """)
    inst = make_instance(guest, limits=LimitsConfig(call_timeout_ms=30))
    status = inst.filter(POD, ["node-1"], handle).statuses[0][1]
    assert status.code == Code.ERROR
    assert status.reason.startswith("wasm plugin spinner: trap in filter: deadline exceeded")
    assert inst.broken


# --- _start ------------------------------------------------------------------------------------

def start_guest(compiler: GuestCompiler, name: str, start_body: str) -> CompiledGuest:
    """A guest whose _start runs `start_body`; $say(fd) writes 'panic: bad config' to fd."""
    return wat_guest(compiler, name, f"""
    (module
      (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
      (import "wasi_snapshot_preview1" "proc_exit" (func $proc_exit (param i32)))
      (memory (export "memory") 1)
      (data (i32.const 64) "panic: bad config\\n")
      (func $say (param $fd i32)
        (i32.store (i32.const 0) (i32.const 64))
        (i32.store (i32.const 4) (i32.const 18))
        (drop (call $fd_write (local.get $fd) (i32.const 0) (i32.const 1) (i32.const 8))))
      (func (export "_start") {start_body})
      (func (export "filter") (result i32) (i32.const 0)))
    """)


def test_trap_in_start_fails_the_load(compiler: GuestCompiler) -> None:
    guest = start_guest(compiler, "start-trap", "(call $say (i32.const 2)) unreachable")
    with pytest.raises(GuestLoadError) as excinfo:
        GuestInstance(guest, PluginConfig(name="start-trap", guest_url="start-trap.wat"), "st-1")
    assert str(excinfo.value) == (f"wasm guest 'start-trap' (start-trap.wat): _start failed: wasm trap: "
                                  f"{UNREACHABLE}; stderr: panic: bad config")


@pytest.mark.parametrize("code", [1, 3, 255])
def test_nonzero_exit_in_start_fails_the_load(code: int, compiler: GuestCompiler) -> None:
    guest = start_guest(compiler, "start-exit", f"(call $say (i32.const 2)) (call $proc_exit (i32.const {code}))")
    with pytest.raises(GuestLoadError) as excinfo:
        GuestInstance(guest, PluginConfig(name="start-exit", guest_url="start-exit.wat"), "se-1")
    assert str(excinfo.value) == (f"wasm guest 'start-exit' (start-exit.wat): _start exited with code {code}; "
                                  "stderr: panic: bad config")


def test_zero_exit_in_start_loads(compiler: GuestCompiler, handle: EmptyHandle) -> None:
    guest = start_guest(compiler, "start-ok", "(call $say (i32.const 1)) (call $proc_exit (i32.const 0))")
    inst = GuestInstance(guest, PluginConfig(name="start-ok", guest_url="start-ok.wat"), "so-1")
    assert inst.output.stdout == bytearray()  # _start's output was flushed, not kept for the next call
    assert inst.filter(POD, ["node-1"], handle).statuses[0][1] == Status(Code.SUCCESS, "", "start-ok")


def test_failed_start_shows_stdout_too(compiler: GuestCompiler) -> None:
    """The ABI puts the captured output, stdout included, in a failed load's message (was a bug)."""
    guest = start_guest(compiler, "start-stdout", "(call $say (i32.const 1)) (call $proc_exit (i32.const 1))")
    with pytest.raises(GuestLoadError) as excinfo:
        GuestInstance(guest, PluginConfig(name="start-stdout", guest_url="start-stdout.wat"), "ss-1")
    assert "panic: bad config" in str(excinfo.value)


def test_host_call_without_a_cycle_in_start_fails_the_load(compiler: GuestCompiler) -> None:
    guest = wat_guest(compiler, "eager", """
    (module
      (import "k8s.io/scheduler" "currentPod" (func $pod (param i32 i32) (result i32)))
      (memory (export "memory") 1)
      (func (export "_start") (drop (call $pod (i32.const 0) (i32.const 100))))
      (func (export "filter") (result i32) (i32.const 0)))
    """)
    with pytest.raises(GuestLoadError) as excinfo:
        GuestInstance(guest, PluginConfig(name="eager", guest_url="eager.wat"), "e-1")
    assert str(excinfo.value).startswith("wasm guest 'eager' (eager.wat): _start failed: ")
    assert "currentPod called outside any extension point" in str(excinfo.value)


# --- through actors -------------------------------------------------------------------------------

class Recorder(pykka.ThreadingActor):
    """A stand-in supervisor that keeps what it is told."""

    def __init__(self) -> None:
        super().__init__()
        self.told: list[Any] = []

    def on_receive(self, message: Any) -> Any:
        if message == "told?":
            return list(self.told)
        self.told.append(message)
        return None


@pytest.fixture
def actors(probe: CompiledGuest) -> Iterator[Callable[..., pykka.ActorRef[Any]]]:
    started: list[pykka.ActorRef[Any]] = []

    def start(instance_id: str, supervisor: pykka.ActorRef[Any] | None = None,
              guest: CompiledGuest | None = None) -> pykka.ActorRef[Any]:
        g = guest or probe
        ref = GuestActor.start(g, PluginConfig(name=g.name, guest_url=g.url), instance_id,
                               wire_cache=WireCache(), supervisor=supervisor)
        started.append(ref)
        return ref

    yield start
    for ref in started:
        ref.stop()


def describe(ref: pykka.ActorRef[Any]) -> InstanceInfo:
    info = ref.ask(Describe(), timeout=5)
    assert isinstance(info, InstanceInfo)
    return info


def _instance(ref: pykka.ActorRef[Any]) -> GuestInstance:
    inst = ref.proxy().instance.get(timeout=5)
    assert isinstance(inst, GuestInstance)
    return inst


def test_one_actor_trapping_leaves_the_other_working(
    actors: Callable[..., pykka.ActorRef[Any]], handle: EmptyHandle, make_instance: Callable[..., GuestInstance]
) -> None:
    supervisor = Recorder.start()
    try:
        a = actors("probe-a", supervisor)
        b = actors("probe-b", supervisor)
        inst_a, inst_b = _instance(a), _instance(b)
        assert inst_a is not inst_b
        # the actors are idle between messages, so loading scripts from here is safe
        stderr_then(Script(), b"panic: a is broken\n").op("trap").load(inst_a)
        script = Script()
        script.op("status_reason", *script.put(b"b says no")).op("node_digit", 0x10).load(inst_b)

        trapped = a.ask(Invoke("filter", (POD, ["node-1", "node-2"], handle), pod="shop/web-0"), timeout=5)
        reason = f"wasm plugin probe: trap in filter: wasm trap: {UNREACHABLE}; stderr: panic: a is broken"
        assert trapped == FilterResult((("node-1", Status(Code.ERROR, reason, "probe")),
                                        ("node-2", Status(Code.ERROR, reason, "probe"))))
        answered = b.ask(Invoke("filter", (POD, ["node-0", "node-2", "node-3"], handle)), timeout=5)
        assert answered == FilterResult((
            ("node-0", Status(Code.SUCCESS, "", "probe")),
            ("node-2", Status(Code.UNSCHEDULABLE, "b says no", "probe")),
            ("node-3", Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "b says no", "probe")),
        ))
        # a keeps answering, with Error, without running guest code
        again = a.ask(Invoke("reserve", (POD, "node-1", handle)), timeout=5)
        assert again == Status(Code.ERROR, "wasm plugin probe: instance probe-a is discarded (cannot run "
                               f"reserve): {reason}", "probe")
        info_a, info_b = describe(a), describe(b)
        assert (info_a.instance_id, info_a.calls, info_a.broken, info_a.load_failed) == (
            "probe-a", 1, reason, False)
        assert (info_b.instance_id, info_b.calls, info_b.broken, info_b.load_failed) == (
            "probe-b", 3, "", False)
        assert word(inst_a, CALLS) == 1 and word(inst_b, CALLS) == 3
        # the supervisor heard once, about a only, that it trapped (the trap counter's source)
        assert supervisor.ask("told?", timeout=5) == [InstanceBroken("probe-a", reason, trapped=True)]
        # b still works after all that; so does the host
        Script().returns(0, -5).load(inst_b)
        assert b.ask(Invoke("score", (POD, ["node-1"], handle)), timeout=5) == ScoreResult(
            Status(Code.SUCCESS, "", "probe"), (NodeScore("node-1", -5),))
        assert a.is_alive() and b.is_alive()
        fresh = make_instance()
        Script().returns(2).load(fresh)
        assert fresh.bind(POD, "node-1", handle) == Status(Code.UNSCHEDULABLE, "", "probe")
    finally:
        supervisor.stop()


def test_actor_whose_instance_failed_to_start(
    actors: Callable[..., pykka.ActorRef[Any]], compiler: GuestCompiler, handle: EmptyHandle
) -> None:
    supervisor = Recorder.start()
    try:
        guest = start_guest(compiler, "start-trap", "(call $say (i32.const 2)) unreachable")
        ref = actors("start-trap-1", supervisor, guest)
        why = (f"wasm guest 'start-trap' (start-trap.wat): _start failed: wasm trap: {UNREACHABLE}; "
               "stderr: panic: bad config")
        info = describe(ref)
        assert (info.load_failed, info.broken, info.calls, info.exports) == (True, why, 0, frozenset())
        res = ref.ask(Invoke("filter", (POD, ["node-1", "node-2"], handle)), timeout=5)
        error = Status(Code.ERROR, f"wasm plugin start-trap: no instance to run filter: {why}", "start-trap")
        assert res == FilterResult((("node-1", error), ("node-2", error)))
        permit = ref.ask(Invoke("permit", (POD, "node-1", handle)), timeout=5)
        assert permit == PermitResult(Status(Code.ERROR, f"wasm plugin start-trap: no instance to run permit: "
                                                         f"{why}", "start-trap"))
        assert supervisor.ask("told?", timeout=5) == [InstanceBroken("start-trap-1", why)]
    finally:
        supervisor.stop()


def test_results_area_is_untouched_by_a_broken_instance(make_instance: Callable[..., GuestInstance],
                                                         handle: EmptyHandle) -> None:
    """After the trap, a later call must not run ops: the results area keeps its old words."""
    inst = make_instance()
    Script().op("severity").op("trap").load(inst)
    inst.prescore(POD, NODES, handle)
    assert results(inst, 1) == [1]  # severity: the suite's log is at warning
    inst.memory.write(RESULTS, struct.pack("<I", 77))
    inst.prescore(POD, NODES, handle)
    assert results(inst, 1) == [77]

"""The assignment lifecycle: the seed's scenarios, through the plugin facade.

The checker guest (guests/checker.wat) traps whenever a call of a pod's cycle reaches
an instance that did not run that pod's prefilter, so every `ok` status below is also
a proof that the call reached the right instance.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pykka
import pytest

from tests.conftest import GUESTS, SCORER_WAT, wat_guest
from wasm_scheduler.actors.guest_actor import GuestActor
from wasm_scheduler.actors.supervisor import Assigned, Lost, Reap
from wasm_scheduler.adapters.wasm_plugin import WasmPlugin
from wasm_scheduler.framework_api import Code, NodeScore
from wasm_scheduler.registry.compiler import GuestCompiler
from wasm_scheduler.registry.config import PluginConfig, PoolConfig

NODES = ["node-1", "node-2", "node-3"]


def make_pod(name: str) -> dict:
    return {"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


@pytest.fixture
def checker_plugin(compiler: GuestCompiler) -> Iterator[Callable[..., WasmPlugin]]:
    started: list[WasmPlugin] = []

    def make(**pool: float) -> WasmPlugin:
        config = PluginConfig("checker", str(GUESTS / "checker.wat"), pool=PoolConfig(**pool))  # type: ignore[arg-type]
        plugin = WasmPlugin.load(config, compiler)
        started.append(plugin)
        return plugin

    yield make
    for plugin in started:
        plugin.close()


def instance_of(plugin: WasmPlugin, pod: dict) -> str | None:
    answer = plugin.assignment(pod)
    return answer.instance_id if isinstance(answer, Assigned) else None


def scheduling_cycle(plugin: WasmPlugin, pod: dict, nodes: list[str] = NODES) -> None:
    assert plugin.pre_filter(None, pod).status.ok
    statuses = plugin.filter_nodes(None, pod, nodes)
    assert all(s.ok for s in statuses.values()), statuses
    assert plugin.pre_score(None, pod, nodes).ok
    scores = plugin.score_nodes(None, pod, nodes)
    assert scores.status.ok and [s.score for s in scores.scores] == [1] * len(nodes)
    assert plugin.normalize_score(None, pod, scores.scores).status.ok
    assert plugin.reserve(None, pod, nodes[0]).ok


def binding_cycle(plugin: WasmPlugin, pod: dict, node: str = NODES[0]) -> None:
    assert plugin.pre_bind(None, pod, node).ok
    assert plugin.bind(None, pod, node).code == Code.SKIP
    plugin.post_bind(None, pod, node)


def bind_together(plugin: WasmPlugin, pods: list[dict]) -> None:
    """All pods past Permit at once (one instance each), then all their binding cycles."""
    for pod in pods:
        scheduling_cycle(plugin, pod)
        plugin.permit(None, pod, NODES[0])
    for pod in pods:
        binding_cycle(plugin, pod)


def test_pod_rejected_in_filter_releases_its_instance_at_next_prefilter(checker_plugin) -> None:
    plugin = checker_plugin()
    a, b = make_pod("a"), make_pod("b")
    plugin.pre_filter(None, a)
    assert all(s.ok for s in plugin.filter_nodes(None, a, NODES).values())
    served_a = instance_of(plugin, a)
    # No node fits: the framework stops the cycle; no Permit ever comes for a.
    scheduling_cycle(plugin, b)
    assert instance_of(plugin, b) == served_a, "the slot's actor is reassigned, not a new one"
    assert instance_of(plugin, a) is None
    late = plugin.score_nodes(None, a, NODES)
    assert late.status.code == Code.ERROR and "no instance is assigned" in late.status.reason
    counts = plugin.counts()
    assert (counts.started, counts.scheduling, counts.binding, counts.idle) == (1, 1, 0, 0)
    assert counts.balanced


def test_a_slot_actor_that_died_between_cycles_is_replaced_for_the_next_pod(checker_plugin) -> None:
    plugin = checker_plugin()
    a, b = make_pod("a"), make_pod("b")
    scheduling_cycle(plugin, a)  # no Permit: the slot keeps a's actor for the next pod
    served_a = instance_of(plugin, a)
    answer = plugin.assignment(a)
    assert isinstance(answer, Assigned)
    answer.actor.stop()
    # b has no state anywhere yet: it starts on another instance instead of failing.
    scheduling_cycle(plugin, b)
    assert instance_of(plugin, b) not in (None, served_a)
    counts = plugin.counts()
    assert (counts.discarded, counts.scheduling) == (1, 1) and counts.balanced


def test_pod_past_permit_keeps_its_instance_through_binding(checker_plugin) -> None:
    plugin = checker_plugin()
    a, b, c = make_pod("a"), make_pod("b"), make_pod("c")
    scheduling_cycle(plugin, a)
    assert plugin.permit(None, a, NODES[0]).status.ok
    served_a = instance_of(plugin, a)
    scheduling_cycle(plugin, b)  # the next pod is scheduled while a waits to bind
    served_b = instance_of(plugin, b)
    assert served_b not in (None, served_a)
    assert plugin.placement() == {served_a: "binding", served_b: "slot"}
    binding_cycle(plugin, a)  # the checker traps if any of these reached b's instance
    assert instance_of(plugin, a) is None
    assert plugin.placement() == {served_a: "idle", served_b: "slot"}
    # b never reached Permit: c's PreFilter takes over the slot's instance, not a's idle one.
    scheduling_cycle(plugin, c)
    assert instance_of(plugin, c) == served_b and instance_of(plugin, b) is None
    assert plugin.placement() == {served_a: "idle", served_b: "slot"}
    counts = plugin.counts()
    assert counts.discarded == 0 and counts.started == 2 and counts.binding == 0 and counts.balanced


def test_binding_cycles_of_many_pods_run_in_parallel(checker_plugin) -> None:
    plugin = checker_plugin()
    pods = [make_pod(f"p{i}") for i in range(8)]
    for pod in pods:
        scheduling_cycle(plugin, pod)
        assert plugin.permit(None, pod, NODES[0]).status.ok
    assert plugin.counts().binding == 8
    barrier = threading.Barrier(8)

    def bind(pod: dict) -> None:
        barrier.wait(timeout=10)
        for _ in range(5):  # several calls each, interleaved with the other pods'
            assert plugin.pre_bind(None, pod, NODES[0]).ok
        binding_cycle(plugin, pod)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(bind, pods))
    counts = plugin.counts()
    assert (counts.binding, counts.idle, counts.discarded, counts.started) == (0, 8, 0, 8)
    assert counts.balanced


def test_unreserve_runs_on_the_pods_own_instance_wherever_it_is(checker_plugin) -> None:
    plugin = checker_plugin()
    a, b = make_pod("a"), make_pod("b")
    scheduling_cycle(plugin, a)
    plugin.permit(None, a, NODES[0])
    scheduling_cycle(plugin, b)
    served_a, served_b = instance_of(plugin, a), instance_of(plugin, b)
    plugin.unreserve(None, a, NODES[0])  # from the binding map: must not touch b's instance
    plugin.unreserve(None, b, NODES[0])  # from the scheduling slot (Reserve failed for b)
    placement = plugin.placement()
    assert placement == {served_a: "idle", served_b: "idle"}
    assert plugin.counts().discarded == 0, "the checker trapped: unreserve reached the wrong instance"


def test_preemption_calls_from_many_threads_are_serialized_on_the_pods_instance(checker_plugin) -> None:
    plugin = checker_plugin()
    preemptor, victim = make_pod("preemptor"), make_pod("victim")
    plugin.pre_filter(None, preemptor)
    barrier = threading.Barrier(6)
    outcomes: list[bool] = []

    def candidate(node: str) -> None:
        barrier.wait(timeout=10)
        for _ in range(20):
            outcomes.append(plugin.remove_pod(None, preemptor, victim, node).ok)
            outcomes.append(all(s.ok for s in plugin.filter_nodes(None, preemptor, [node]).values()))
            outcomes.append(plugin.add_pod(None, preemptor, victim, node).ok)

    with ThreadPoolExecutor(6) as pool:
        list(pool.map(candidate, [f"node-{i}" for i in range(6)]))
    assert len(outcomes) == 360 and all(outcomes)
    counts = plugin.counts()
    assert counts.started == 1 and counts.discarded == 0


def test_a_trap_discards_the_instance_and_the_pod_gets_errors_not_a_fresh_instance(checker_plugin) -> None:
    plugin = checker_plugin()
    a, b = make_pod("a"), make_pod("b")
    plugin.pre_filter(None, a)
    statuses = plugin.filter_nodes(None, a, ["node-1", "x-trap", "node-3"])
    assert statuses["node-1"].ok
    assert statuses["x-trap"].code == Code.ERROR and "trap in filter" in statuses["x-trap"].reason
    assert statuses["node-3"].code == Code.ERROR
    later = plugin.score_nodes(None, a, NODES)
    assert later.status.code == Code.ERROR and "discarded" in later.status.reason
    assert not plugin.reserve(None, a, NODES[0]).ok
    counts = plugin.counts()
    assert counts.discarded == 1 and counts.balanced
    assert counts.idle >= 1, "the pool is topped up after a discard"
    scheduling_cycle(plugin, b)  # the next pod is served normally
    assert plugin.permit(None, b, NODES[0]).status.ok
    binding_cycle(plugin, b)


def test_guests_without_permit_or_postbind_still_give_their_instance_back(compiler: GuestCompiler) -> None:
    guest = wat_guest(compiler, "filter-only", """
        (module (memory (export "memory") 1)
          (func (export "filter") (result i32) (i32.const 0)))""")
    with WasmPlugin(guest, PluginConfig("filter-only", guest.url)) as plugin:
        assert plugin.implements("permit") and plugin.implements("post_bind")
        assert not plugin.implements("score") and plugin.implements("filter")
        for i in range(5):
            pod = make_pod(f"p{i}")
            assert plugin.pre_filter(None, pod).status.ok
            assert all(s.ok for s in plugin.filter_nodes(None, pod, NODES).values())
            assert plugin.permit(None, pod, NODES[0]).status.ok
            assert plugin.bind(None, pod, NODES[0]).code == Code.SKIP
            plugin.post_bind(None, pod, NODES[0])
        counts = plugin.counts()
        assert (counts.binding, counts.scheduling, counts.started) == (0, 0, 1) and counts.balanced


def test_score_only_guest_gets_a_cycle_without_exporting_prefilter(compiler: GuestCompiler) -> None:
    guest = wat_guest(compiler, "score-only", """
        (module (memory (export "memory") 1)
          (func (export "score") (result i64) (i64.const 0x700000000)))""")
    with WasmPlugin(guest, PluginConfig("score-only", guest.url)) as plugin:
        pod = make_pod("a")
        plugin.pre_filter(None, pod)
        result = plugin.score_nodes(None, pod, NODES)
        assert result.status.ok and result.scores == tuple(NodeScore(n, 7) for n in NODES)
        assert plugin.normalize_score(None, pod, result.scores).scores == result.scores


def test_events_to_register_borrows_an_idle_actor_outside_every_cycle(compiler: GuestCompiler) -> None:
    guest = wat_guest(compiler, "events", """
        (module (import "k8s.io/scheduler" "result.cluster_events" (func $ev (param i32 i32)))
          (memory (export "memory") 1)
          (data (i32.const 16) "\\01\\00\\00\\00\\08\\00\\00\\00\\00\\00\\00\\00\\01\\00\\00\\00")
          (func (export "enqueue") (call $ev (i32.const 16) (i32.const 16)))
          (func (export "filter") (result i32) (i32.const 0)))""")
    with WasmPlugin(guest, PluginConfig("events", guest.url)) as plugin:
        events = plugin.events_to_register()
        assert [(int(e.resource), int(e.action)) for e in events] == [(1, 8), (0, 1)]
        assert plugin.events_to_register() is events  # asked once, then cached
        counts = plugin.counts()
        assert (counts.idle, counts.lent, counts.started) == (1, 0, 1)


def test_max_instances_gives_a_clear_error_when_reached(checker_plugin) -> None:
    plugin = checker_plugin(max_instances=1)
    a, b = make_pod("a"), make_pod("b")
    scheduling_cycle(plugin, a)
    plugin.permit(None, a, NODES[0])
    result = plugin.pre_filter(None, b)
    assert result.status.code == Code.ERROR and "maxInstances" in result.status.reason
    binding_cycle(plugin, a)
    scheduling_cycle(plugin, b)  # the instance came back: b is served now
    assert plugin.counts().started == 1


def test_idle_instances_beyond_min_idle_are_stopped_after_idle_time(checker_plugin) -> None:
    plugin = checker_plugin(min_idle=1, idle_seconds=0)
    bind_together(plugin, [make_pod(f"p{i}") for i in range(4)])
    plugin.supervisor.ask(Reap())  # what the idle timer tells it
    counts = plugin.counts()
    assert counts.idle == 1 and counts.reaped == 3 and counts.balanced


def test_lost_answer_for_unknown_pod(checker_plugin) -> None:
    plugin = checker_plugin()
    answer = plugin.assignment({"metadata": {"name": "nobody", "uid": "nobody"}})
    assert isinstance(answer, Lost)
    assert not plugin.pre_bind(None, make_pod("nobody"), NODES[0]).ok


def test_surplus_idle_instances_stop_on_their_own_after_idle_time(checker_plugin) -> None:
    plugin = checker_plugin(min_idle=1, idle_seconds=0.05)
    bind_together(plugin, [make_pod(f"p{i}") for i in range(4)])
    # No further message reaches the supervisor: only its timer can make it reap, which
    # shows in the actor registry (asking the supervisor would itself trigger a reap).
    for _ in range(300):
        if len(pykka.ActorRegistry.get_by_class(GuestActor)) == 1:
            break
        time.sleep(0.01)
    assert len(pykka.ActorRegistry.get_by_class(GuestActor)) == 1
    counts = plugin.counts()
    assert (counts.idle, counts.reaped) == (1, 3) and counts.balanced


# --- a guest with no export of the binding cycle -----------------------------------------

@pytest.fixture
def scorer_plugin(compiler: GuestCompiler) -> Iterator[WasmPlugin]:
    guest = wat_guest(compiler, "scorer", SCORER_WAT)
    with WasmPlugin(guest, PluginConfig("scorer", guest.url)) as plugin:
        yield plugin


def test_a_pod_of_a_guest_without_binding_exports_keeps_the_slot_through_permit(scorer_plugin) -> None:
    plugin = scorer_plugin
    a, b = make_pod("a"), make_pod("b")
    scheduling_cycle(plugin, a)
    assert plugin.permit(None, a, NODES[0]).status.ok
    served_a = instance_of(plugin, a)
    assert served_a is not None and plugin.placement() == {served_a: "slot"}, "no instance held for binding"
    # The next pod takes the slot's actor over (the checker traps if a call of b reached
    # an instance that did not run b's prefilter, so this also proves b's calls stay there).
    scheduling_cycle(plugin, b)
    assert instance_of(plugin, b) == served_a and instance_of(plugin, a) is None
    plugin.post_bind(None, a, NODES[0])  # a holds nothing any more: b keeps its instance
    assert instance_of(plugin, b) == served_a
    assert plugin.permit(None, b, NODES[0]).status.ok
    plugin.post_bind(None, b, NODES[0])  # nobody took b's slot over: its actor is idle again
    counts = plugin.counts()
    assert (counts.started, counts.idle, counts.scheduling, counts.binding) == (1, 1, 0, 0) and counts.balanced


def test_an_unreserved_pod_of_a_guest_without_binding_exports_frees_the_slot(scorer_plugin) -> None:
    plugin = scorer_plugin
    a, b = make_pod("a"), make_pod("b")
    scheduling_cycle(plugin, a)
    assert plugin.permit(None, a, NODES[0]).status.ok
    plugin.unreserve(None, a, NODES[0])
    assert instance_of(plugin, a) is None
    scheduling_cycle(plugin, b)  # from the pool: the same, most recently used, instance
    counts = plugin.counts()
    assert (counts.started, counts.scheduling, counts.idle) == (1, 1, 0) and counts.balanced


def test_a_pod_of_a_guest_without_binding_exports_costs_the_supervisor_one_message(scorer_plugin,
                                                                                  monkeypatch) -> None:
    # BeginCycle, answered once for the whole cycle; no Release for a pod whose slot the
    # supervisor already said went to the next pod.
    plugin = scorer_plugin
    told: list[str] = []
    tell = plugin.supervisor.tell
    monkeypatch.setattr(plugin.supervisor, "tell", lambda message: (told.append(type(message).__name__),
                                                                     tell(message))[1])
    pods = [make_pod(f"p{i}") for i in range(5)]
    scheduling_cycle(plugin, pods[0])
    for previous, pod in zip(pods, pods[1:], strict=False):
        assert plugin.permit(None, previous, NODES[0]).status.ok
        scheduling_cycle(plugin, pod)
        plugin.post_bind(None, previous, NODES[0])  # after the next pod took the slot
    assert told == ["BeginCycle"] * len(pods)
    assert instance_of(plugin, pods[-1]) is not None
    plugin.post_bind(None, pods[-1], NODES[0])  # the last pod still holds the slot: released
    assert told[-1] == "Release"
    counts = plugin.counts()
    assert (counts.started, counts.scheduling, counts.idle) == (1, 0, 1) and counts.balanced


def test_a_slot_actor_whose_instance_trapped_is_never_passed_on(checker_plugin) -> None:
    plugin = checker_plugin()
    for i in range(8):  # the next PreFilter follows the trap at once, before the supervisor stops the actor
        a, b = make_pod(f"a{i}"), make_pod(f"b{i}")
        assert plugin.pre_filter(None, a).status.ok
        served_a = instance_of(plugin, a)
        assert plugin.filter_nodes(None, a, ["x-trap"])["x-trap"].code == Code.ERROR
        assert plugin.pre_filter(None, b).status.ok, "b started on the broken instance"
        assert instance_of(plugin, b) not in (None, served_a)
    counts = plugin.counts()
    assert counts.discarded == 8 and counts.balanced


def test_a_pod_scheduled_again_while_its_last_binding_cycle_runs_leaks_nothing(probe) -> None:
    # The extender can do this: kube-scheduler's bind call times out while the guest's bind
    # still runs, and the pod comes back to filter. The binding cycle that ends first
    # releases its own actor; the new cycle's is released when its own binding cycle ends.
    with WasmPlugin(probe, PluginConfig("probe", probe.url)) as plugin:
        p = make_pod("p")
        assert plugin.pre_filter(None, p).status.ok
        assert plugin.permit(None, p, NODES[0]).status.ok  # the first cycle's instance goes to binding
        assert plugin.pre_filter(None, p).status.ok  # scheduled again meanwhile
        plugin.post_bind(None, p, NODES[0])  # the first binding cycle ends
        assert plugin.counts().binding == 0
        assert plugin.permit(None, p, NODES[0]).status.ok
        plugin.post_bind(None, p, NODES[0])
        counts = plugin.counts()
        assert (counts.scheduling, counts.binding, counts.idle) == (0, 0, counts.started) and counts.balanced


def test_our_own_bug_in_a_call_to_a_passed_on_actor_is_an_error_and_discards_it(scorer_plugin, monkeypatch) -> None:
    plugin = scorer_plugin
    a, b, c = make_pod("a"), make_pod("b"), make_pod("c")
    scheduling_cycle(plugin, a)
    served_a = instance_of(plugin, a)
    invoke = GuestActor._invoke

    def buggy(self: GuestActor, message: Any, point: str = "") -> Any:
        if message.pod == "default/b":
            raise RuntimeError("a bug of the host")
        return invoke(self, message, point)

    monkeypatch.setattr(GuestActor, "_invoke", buggy)
    result = plugin.pre_filter(None, b)  # a's actor, reassigned to b, raises
    assert result.status.code == Code.ERROR and "internal error in prefilter" in result.status.reason
    scheduling_cycle(plugin, c)  # the suspect instance is gone: c starts on another
    assert instance_of(plugin, c) not in (None, served_a)
    counts = plugin.counts()
    assert counts.discarded == 1 and counts.balanced


def test_a_pod_scheduled_again_while_binding_keeps_each_cycle_on_its_own_instance(checker_plugin) -> None:
    # The first binding cycle's calls reach the instance it took to binding, the new
    # scheduling cycle's calls the slot's: the checker's postbind ends the cycle it runs
    # on, so a postbind on the new cycle's instance would make its next filter trap.
    plugin = checker_plugin()
    p = make_pod("p")
    scheduling_cycle(plugin, p)
    assert plugin.permit(None, p, NODES[0]).status.ok
    first = instance_of(plugin, p)
    assert plugin.pre_filter(None, p).status.ok  # scheduled again (the extender after a bind timeout)
    second = instance_of(plugin, p)
    assert second not in (None, first)
    binding_cycle(plugin, p)  # the first cycle's prebind, bind and postbind
    assert all(s.ok for s in plugin.filter_nodes(None, p, NODES).values()), "a binding call reached the new cycle"
    assert instance_of(plugin, p) == second
    assert plugin.permit(None, p, NODES[0]).status.ok
    binding_cycle(plugin, p)
    counts = plugin.counts()
    assert (counts.binding, counts.scheduling, counts.discarded) == (0, 0, 0) and counts.balanced


def test_a_pod_moved_to_binding_again_before_its_last_binding_cycle_ended_leaks_nothing(probe) -> None:
    # The extender after a bind timeout: the pod is scheduled and held for binding again
    # while the first bind still runs. One binding assignment a pod: the older actor
    # returns to the pool instead of being lost to every count.
    with WasmPlugin(probe, PluginConfig("probe", probe.url)) as plugin:
        p = make_pod("p")
        for _ in range(2):
            assert plugin.pre_filter(None, p).status.ok
            plugin.hold_for_binding(p)
        counts = plugin.counts()
        assert (counts.binding, counts.scheduling) == (1, 0) and counts.balanced, counts
        plugin.post_bind(None, p, NODES[0])
        counts = plugin.counts()
        assert (counts.binding, counts.idle) == (0, counts.started) and counts.balanced, counts


def test_an_idle_actor_keeps_nothing_of_its_last_call(checker_plugin) -> None:
    # pykka keeps an actor's last message until the next one: the call's arguments (the
    # pod, the node names, the request's handle with its nodes) must not stay with it.
    import gc
    import weakref

    from wasm_scheduler.adapters.framework.cycle_state import CycleState
    from wasm_scheduler.vocabulary import EmptyHandle

    plugin = checker_plugin()
    handle = EmptyHandle()
    gone = weakref.ref(handle)
    state = CycleState(handle)
    pod = make_pod("a")
    assert plugin.pre_filter(state, pod).status.ok
    assert all(s.ok for s in plugin.filter_nodes(state, pod, NODES).values())
    del state, handle
    gc.collect()
    assert gone() is None

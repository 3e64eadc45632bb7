"""Threaded stress: thousands of pods with random fates through one wasm plugin.

One thread runs scheduling cycles, as kube-scheduler does; binding cycles run on 8
worker threads; some pods get a burst of concurrent Filter/AddPod/RemovePod calls from
4 threads (preemption); some are made to trap. The checker guest traps whenever a
call of a pod's cycle reaches an instance that did not run that pod's prefilter, so
the number of discarded instances must equal the number of injected traps exactly.
Bounded: a fixed number of pods (STRESS_PODS, default 2000) with a deadline.
"""

from __future__ import annotations

import os
import random
import time
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor, wait

import pytest

from tests.conftest import GUESTS, SCORER_WAT
from wasm_scheduler.adapters.wasm_plugin import WasmPlugin
from wasm_scheduler.framework_api import Code
from wasm_scheduler.registry.compiler import GuestCompiler
from wasm_scheduler.registry.config import PluginConfig

PODS = int(os.environ.get("STRESS_PODS", "2000"))
DEADLINE_S = 120
NODES = [f"node-{i}" for i in range(5)]
FATES = {
    "rejected_in_filter": 15, "trap": 3, "permit_rejects": 10, "wait_then_allowed": 15,
    "wait_times_out": 10, "bind_fails": 10, "success": 37,
}


def pod(i: int) -> dict:
    return {"metadata": {"name": f"pod-{i}", "namespace": "stress", "uid": f"uid-{i}"}}


@pytest.mark.parametrize("guest", ["checker", "scorer"])
def test_thousands_of_pods_with_random_fates(compiler: GuestCompiler, guest: str) -> None:
    """`checker` exports every point; `scorer` nothing of the binding cycle, so its pods
    keep the scheduling slot through Permit and the next PreFilter takes it over while
    binding threads end the earlier pods' cycles."""
    rng = random.Random(20261202)
    wat = (GUESTS / "checker.wat").read_text() if guest == "checker" else SCORER_WAT
    plugin = WasmPlugin(compiler.compile(guest, f"{guest}.wat", wat.encode()), PluginConfig(guest, f"{guest}.wat"))
    binding_exports = plugin.implements("pre_bind")
    outcomes: dict[int, str] = {}
    failures: list[str] = []
    started = time.monotonic()

    def expect(ok: bool, what: str) -> None:
        if not ok:
            failures.append(what)

    def binding_cycle(i: int, fate: str, p: dict) -> None:
        if fate in ("wait_then_allowed", "wait_times_out"):
            time.sleep(rng.random() / 1000)
        if fate == "wait_times_out":
            plugin.unreserve(None, p, NODES[0])
            outcomes[i] = "unschedulable (permit timeout)"
            return
        if binding_exports:  # the framework calls only the points a plugin implements
            expect(plugin.pre_bind(None, p, NODES[0]).ok, f"pod {i} prebind")
        if fate == "bind_fails":  # another binder failed: Unreserve on the pod's own instance
            plugin.unreserve(None, p, NODES[0])
            outcomes[i] = "error (bind failed)"
            return
        if binding_exports:
            expect(plugin.bind(None, p, NODES[0]).code == Code.SKIP, f"pod {i} bind")
        plugin.post_bind(None, p, NODES[0])
        outcomes[i] = "bound"

    def preemption_burst(p: dict) -> bool:
        def candidate(node: str) -> bool:
            return (plugin.remove_pod(None, p, victim, node).ok
                    and all(s.ok for s in plugin.filter_nodes(None, p, [node]).values())
                    and plugin.add_pod(None, p, victim, node).ok)

        victim = pod(-1)
        return all(burst.map(candidate, NODES[:4]))

    fates = rng.choices(list(FATES), weights=list(FATES.values()), k=PODS)
    pending: list[Future[None]] = []
    with ThreadPoolExecutor(8, thread_name_prefix="binding") as binder, \
            ThreadPoolExecutor(4, thread_name_prefix="preemption") as burst:
        for i, fate in enumerate(fates):
            assert time.monotonic() - started < DEADLINE_S, f"stress test over its deadline at pod {i}"
            p = pod(i)
            expect(plugin.pre_filter(None, p).status.ok, f"pod {i} prefilter")
            nodes = NODES + ["x-trap"] if fate == "trap" else NODES
            statuses = plugin.filter_nodes(None, p, nodes)
            if fate == "trap":
                expect(statuses["x-trap"].code == Code.ERROR, f"pod {i} trap status")
                expect(plugin.score_nodes(None, p, NODES).status.code == Code.ERROR, f"pod {i} after trap")
                outcomes[i] = "error (trap)"
                continue
            expect(all(s.ok for s in statuses.values()), f"pod {i} filter {statuses}")
            if i % 10 == 0:
                expect(preemption_burst(p), f"pod {i} preemption burst")
            if fate == "rejected_in_filter":
                outcomes[i] = "unschedulable (filter)"
                continue
            expect(plugin.pre_score(None, p, NODES).ok, f"pod {i} prescore")
            expect(plugin.score_nodes(None, p, NODES).status.ok, f"pod {i} score")
            expect(plugin.reserve(None, p, NODES[0]).ok, f"pod {i} reserve")
            expect(plugin.permit(None, p, NODES[0]).status.ok, f"pod {i} permit")
            if fate == "permit_rejects":
                plugin.unreserve(None, p, NODES[0])
                outcomes[i] = "unschedulable (permit)"
                continue
            pending.append(binder.submit(binding_cycle, i, fate, p))
        done, not_done = wait(pending, timeout=DEADLINE_S)
        assert not not_done, f"{len(not_done)} binding cycles did not finish"
        for future in done:
            future.result()

    counts = plugin.counts()
    placement = plugin.placement()
    plugin.close()
    assert not failures, failures[:10]
    assert len(outcomes) == PODS, "every pod reaches a final state"
    traps = Counter(fates)["trap"]
    assert counts.discarded == traps, f"{counts.discarded - traps} cross-pod calls trapped the checker"
    assert counts.binding == 0 and counts.lent == 0
    assert counts.balanced, counts
    assert sorted(placement.values()).count("idle") == len(placement) - counts.scheduling
    # Binding cycles in flight each hold an instance only if the guest can be called in them.
    in_binding = 8 if binding_exports else 0
    assert counts.started <= in_binding + 2 + traps, f"the pool grew beyond what concurrency needs: {counts}"

"""Fault injection: a guest that randomly loops forever, traps, grows memory without
bound, hands the host bad pointers and returns garbage, on parallel binding cycles.

Bounded: FAULT_PODS pods (default 3000), each call under a 20 ms deadline. At the end
every pod is in a final state, the pool balances, no actor or thread is left behind,
and a healthy plugin loaded afterwards in the same process still answers correctly.
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor, wait

import pykka

from tests.conftest import EXAMPLES, GUESTS
from wasm_scheduler.adapters.framework.cluster import cluster_from_objects
from wasm_scheduler.adapters.framework.config import config_from_dict
from wasm_scheduler.adapters.framework.simulation import simulate
from wasm_scheduler.adapters.wasm_plugin import WasmPlugin
from wasm_scheduler.framework_api import Code
from wasm_scheduler.registry.compiler import GuestCompiler
from wasm_scheduler.registry.config import LimitsConfig, PluginConfig

PODS = int(os.environ.get("FAULT_PODS", "3000"))
NODES = [f"node-{i}" for i in range(4)]


def pod(i: int) -> dict:
    return {"metadata": {"name": f"chaos-{i}", "namespace": "chaos", "uid": f"chaos-{i}"}}


def test_random_guest_faults_never_take_the_scheduler_down(compiler: GuestCompiler) -> None:
    compiler.ensure_ticking()  # the compiler's epoch ticker lives as long as the compiler
    threads_before = threading.active_count()
    config = PluginConfig("chaos", str(GUESTS / "chaos.wat"),
                          limits=LimitsConfig(call_timeout_ms=20, memory_limit_mib=16))
    plugin = WasmPlugin.load(config, compiler)
    outcomes: dict[int, str] = {}
    errors: dict[str, int] = {}
    started = time.monotonic()

    def note(status_code: Code, reason: str) -> None:
        for key in ("deadline exceeded", "unreachable", "outside guest memory", "malformed", "discarded"):
            if key in reason:
                errors[key] = errors.get(key, 0) + 1

    def binding(i: int, p: dict) -> None:
        status = plugin.pre_bind(None, p, NODES[0])
        if status.ok:
            status = plugin.bind(None, p, NODES[0])
        if status.ok or status.code == Code.SKIP:
            plugin.post_bind(None, p, NODES[0])
            outcomes[i] = "bound"
        else:
            note(status.code, status.reason)
            plugin.unreserve(None, p, NODES[0])
            outcomes[i] = "error"

    with ThreadPoolExecutor(8, thread_name_prefix="binding") as binder:
        futures = []
        for i in range(PODS):
            assert time.monotonic() - started < 240, "fault injection over its time bound"
            p = pod(i)
            result = plugin.pre_filter(None, p)
            if not result.status.ok:
                note(result.status.code, result.status.reason)
                outcomes[i] = "error"
                continue
            statuses = plugin.filter_nodes(None, p, NODES)
            feasible = [n for n, s in statuses.items() if s.ok]
            for s in statuses.values():
                if not s.ok:
                    note(s.code, s.reason)
            if not feasible:
                outcomes[i] = "unschedulable"
                continue
            scored = plugin.score_nodes(None, p, feasible)
            normalized = plugin.normalize_score(None, p, scored.scores) if scored.status.ok else scored
            reserve = plugin.reserve(None, p, feasible[0]) if normalized.status.ok else normalized.status
            if not reserve.ok:
                note(reserve.code, reserve.reason)
                plugin.unreserve(None, p, feasible[0])
                outcomes[i] = "error"
                continue
            permit = plugin.permit(None, p, feasible[0])
            if not permit.status.ok:
                note(permit.status.code, permit.status.reason)
                plugin.unreserve(None, p, feasible[0])
                outcomes[i] = "error"
                continue
            futures.append(binder.submit(binding, i, p))
        done, not_done = wait(futures, timeout=120)
        assert not not_done
        for future in done:
            future.result()

    counts = plugin.counts()
    plugin.close()
    assert len(outcomes) == PODS, "every pod reached a final state"
    assert counts.binding == 0 and counts.lent == 0 and counts.balanced, counts
    assert counts.discarded > 0 and errors, "the chaos guest injected no fault: the test proves nothing"
    assert {"deadline exceeded", "unreachable", "outside guest memory"} <= set(errors), errors
    # Nothing keeps running: actors stopped, threads back (the epoch ticker predates the test).
    assert pykka.ActorRegistry.get_all() == []
    deadline = time.monotonic() + 5
    while threading.active_count() > threads_before and time.monotonic() < deadline:
        time.sleep(0.02)
    assert threading.active_count() <= threads_before

    # The same process still schedules correctly: a scheduler with a healthy wasm plugin
    # places a pod where that plugin says.
    config = config_from_dict({
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "profiles": [{"schedulerName": "default-scheduler",
                      "plugins": {"multiPoint": {"enabled": [{"name": "NodeNumber", "weight": 5}]}},
                      "pluginConfig": [{"name": "NodeNumber", "args": {
                          "guestURL": str(EXAMPLES / "nodenumber" / "nodenumber.wasm")}}]}],
    })
    nodes = [{"kind": "Node", "metadata": {"name": f"node-{i}"},
              "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}} for i in range(5)]
    web = {"kind": "Pod", "metadata": {"name": "web-3", "namespace": "default"},
           "spec": {"containers": [{"name": "c", "image": "nginx"}]}}
    report = simulate(config, cluster_from_objects([*nodes, web]), compiler=compiler)
    assert [(p.key, p.node) for p in report.pods] == [("default/web-3", "node-3")]

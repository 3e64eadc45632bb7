"""The extender as an unmodified kube-scheduler calls it, against a real API server.

Each test starts `wasm-scheduler extender` and kube-scheduler (built from Kubernetes
1.33's own modules) beside the session's etcd and kube-apiserver, creates Nodes and
Pods through the API, and checks what the real scheduler did: where each pod was
bound and by whom, what the extender's JSON log says about each pod's instance, and
that no instance is left held.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from tests.e2e.cluster import (
    GUESTS,
    NODENUMBER_WASM,
    ExtenderEntry,
    ExtenderProcess,
    Harness,
    node_object,
    pod_object,
    wasm_plugin_config,
)
from wasm_scheduler.adapters.trace import read_trace

BINDING_POINTS = ("reserve", "permit", "prebind", "bind", "postbind")


def digit_of(name: str) -> str:
    found = re.search(r"(\d)$", name)
    assert found, name
    return found.group(1)


def start(harness: Harness, extender_args: Sequence[str] = (), entry: dict[str, Any] | None = None,
          plugins: dict[str, Any] | None = None) -> tuple[ExtenderProcess, ExtenderEntry]:
    """The extender serving `plugins` (by default NodeNumber, and the checker guest, which
    traps when a call of a pod's cycle reaches an instance its PreFilter did not run on),
    and kube-scheduler pointed at it."""
    plugins = plugins if plugins is not None else {"NodeNumber": NODENUMBER_WASM, "Checker": GUESTS / "checker.wat"}
    extender = harness.extender(wasm_plugin_config(plugins), *extender_args).start()
    extender_entry = ExtenderEntry(url_prefix=extender.url, **(entry or {}))
    harness.kube_scheduler([extender_entry]).start()
    return extender, extender_entry


def instances_by_pod(extender: ExtenderProcess, plugin: str) -> dict[str, dict[str, set[str]]]:
    """Pod name -> extension point -> the instances of `plugin` that served it (from the JSON log)."""
    served: dict[str, dict[str, set[str]]] = {}
    for record in extender.log_records():
        if record.get("event") == "call.finished" and record.get("plugin") == plugin:
            pod = str(record.get("pod", "")).rpartition("/")[2]
            point = str(record.get("extension_point", ""))
            served.setdefault(pod, {}).setdefault(point, set()).add(str(record.get("instance", "")))
    return served


def test_filter_prioritize_bind_whole_nodes(harness: Harness) -> None:
    """Case 1: 200 pods land where NodeNumber's score says; each pod's scheduling and
    binding cycle ran on one instance; the Binding was created by the extender."""
    harness.cluster.create_nodes(node_object(f"node-{i}") for i in range(10))
    extender, _entry = start(harness)
    names = harness.cluster.create_pods(pod_object(f"pod-{i}") for i in range(200))
    bound = harness.cluster.wait_bound(names, timeout_s=240)

    wrong = {pod: node for pod, node in bound.items() if digit_of(pod) != digit_of(node)}
    assert not wrong, f"placed against NodeNumber's score: {sorted(wrong.items())[:10]}"

    trace = read_trace(extender.log_lines())
    assert not trace.problems, trace.problems
    for plugin in ("NodeNumber", "Checker"):
        served = instances_by_pod(extender, plugin)
        for pod in names:
            points = served.get(pod)
            assert points, f"{plugin} never served {pod}"
            instances = set().union(*points.values())
            assert len(instances) == 1, f"{pod} on {plugin}: calls reached {points}"
        if plugin == "Checker":
            for pod in names:
                assert {"prefilter", "filter", "score", "reserve", "permit", "prebind", "bind", "postbind"} <= \
                    served[pod].keys(), (pod, sorted(served[pod]))
    assert not [r for r in extender.log_records() if r.get("event") == "call.trapped"]
    # The extender created each Binding: kube-scheduler logged no bind of its own.
    created = [str(r.get("pod")) for r in extender.log_records() if r.get("event") == "bind.api_created"]
    assert sorted(created) == sorted(f"default/{n}" for n in names)
    assert not trace.open_cycles, trace.open_cycles[:5]

"""The extender's watched view of the cluster against a real kube-apiserver.

`watch_cluster` follows the session's API server in-process: nodes added, relabelled
and deleted, pods bound and deleted, are seen within a bounded wait, and after the API
server restarts (every watch connection cut, the watch cache started afresh) the view
recovers by itself. Then the whole path: kube-scheduler with `nodeCacheCapable: true`
sends node names only, to an extender started before any node existed, so every node
object the guests read came through the watch.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

import pytest

from tests.e2e.cluster import NODENUMBER_WASM, ExtenderEntry, Harness, node_object, pod_object, wasm_plugin_config
from tests.e2e.process import wait_for
from wasm_scheduler.adapters.extender.cluster_watch import BackoffPolicy, ClusterWatch, watch_cluster

pytestmark = pytest.mark.e2e

#: How long a change may take to reach the view (it is usually milliseconds).
SEEN_S = 15.0


def seen(check: Callable[[], bool], what: str, timeout_s: float = SEEN_S) -> None:
    wait_for(lambda: check() or None, timeout_s, what, interval_s=0.05)


def labels(watch: ClusterWatch, name: str) -> dict[str, str]:
    node = watch.nodes.get(name)
    return dict(node["metadata"].get("labels") or {}) if node else {}


def pod_names(watch: ClusterWatch) -> set[str]:
    return {p["metadata"]["name"] for p in watch.pods.values()}


def test_nodes_and_pods_follow_the_api_and_survive_an_api_server_restart(harness: Harness) -> None:
    cluster, plane = harness.cluster, harness.control_plane
    cluster.create_nodes([node_object("watch-a"), node_object("watch-b")])
    cluster.create_pods([pod_object("bound-1", node_name="watch-a"), pod_object("pending-1", scheduler_name="none")])
    watch = watch_cluster(kubeconfig=str(plane.kubeconfig), backoff=BackoffPolicy(initial_s=0.2, max_s=2.0))
    try:
        assert watch.wait_synced(30), watch.last_error
        assert {"watch-a", "watch-b"} <= set(watch.nodes)
        node = watch.nodes["watch-a"]
        assert type(node) is dict and node["kind"] == "Node" and node["status"]["allocatable"]["pods"] == "110"
        assert pod_names(watch) == {"bound-1"}  # the pending pod is not kept
        uid = cluster.pod("bound-1")["metadata"]["uid"]  # type: ignore[index]
        assert watch.pods[uid]["spec"]["nodeName"] == "watch-a"

        # Changes during the run.
        cluster.create_nodes([node_object("watch-c")])
        cluster.core.patch_node("watch-a", {"metadata": {"labels": {"zone": "z1"}}})
        cluster.core.delete_node("watch-b")
        seen(lambda: "watch-c" in watch.nodes, "the added node")
        seen(lambda: labels(watch, "watch-a").get("zone") == "z1", "the new label")
        seen(lambda: "watch-b" not in watch.nodes, "the deleted node gone")
        cluster.core.create_namespaced_pod_binding(
            "pending-1", "default",
            {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "pending-1"},
             "target": {"apiVersion": "v1", "kind": "Node", "name": "watch-c"}}, _preload_content=False)
        seen(lambda: pod_names(watch) == {"bound-1", "pending-1"}, "the pod bound since")
        cluster.core.delete_namespaced_pod("bound-1", "default", grace_period_seconds=0)
        seen(lambda: pod_names(watch) == {"pending-1"}, "the deleted pod gone")

        # Every watch connection cut, and the API server away for a second.
        restarts = watch.restarts
        plane.restart_apiserver(down_s=1.0)
        cluster.create_nodes([node_object("watch-d")])
        cluster.core.patch_node("watch-a", {"metadata": {"labels": {"zone": "z2"}}})
        cluster.core.delete_node("watch-c")
        seen(lambda: "watch-d" in watch.nodes, "a node added after the restart", timeout_s=60)
        seen(lambda: labels(watch, "watch-a").get("zone") == "z2", "a label changed after the restart")
        seen(lambda: "watch-c" not in watch.nodes, "a node deleted after the restart")
        cluster.create_pods([pod_object("bound-2", node_name="watch-d")])
        seen(lambda: pod_names(watch) == {"pending-1", "bound-2"}, "a pod bound after the restart")
        assert watch.restarts > restarts  # the cut was noticed and the watch restarted
        # Both resources had events since: confirmed current just now (a quiet healthy watch is
        # confirmed by bookmarks and by each watch's end, so within about a minute).
        age = watch.last_sync_age()
        assert age is not None and age < SEEN_S
        assert set(watch.nodes) >= {"watch-a", "watch-d"} and "watch-b" not in watch.nodes
    finally:
        began = time.monotonic()
        watch.close()
        closed_in = time.monotonic() - began
    assert closed_in < 3.0
    assert not [t for t in watch._threads if t.is_alive()]


def test_node_cache_capable_scheduling_reads_nodes_from_the_watch(harness: Harness) -> None:
    """The extender starts on an empty cluster; the nodes come later, only through its watch,
    and kube-scheduler sends their names only: NodeNumber still places each pod by its digit."""
    extender = harness.extender(wasm_plugin_config({"NodeNumber": NODENUMBER_WASM})).start()
    wait_for(lambda: any(r.get("event") == "extender.view_synced" for r in extender.log_records()) or None, 60,
             "extender.view_synced in the extender's log")
    harness.kube_scheduler([ExtenderEntry(url_prefix=extender.url, node_cache_capable=True)]).start()
    harness.cluster.create_nodes(node_object(f"cache-node-{i}") for i in range(10))
    names = harness.cluster.create_pods(pod_object(f"cache-pod-{i}") for i in range(20))
    bound = harness.cluster.wait_bound(names, timeout_s=180)

    def digit(name: str) -> str:
        found = re.search(r"(\d)$", name)
        assert found, name
        return found.group(1)

    wrong = {pod: node for pod, node in bound.items() if digit(pod) != digit(node)}
    assert not wrong, f"placed against NodeNumber's score: {sorted(wrong.items())}"
    records = extender.log_records()
    watching = [r for r in records if r.get("event") == "extender.view_watching"]
    assert watching and watching[0]["credentials"] == f"--kubeconfig {harness.control_plane.kubeconfig}"
    assert not [r for r in records if r.get("event") == "extender.view_sync_timeout"]
    created = [r.get("pod") for r in records if r.get("event") == "bind.api_created"]
    assert sorted(created) == sorted(f"default/{n}" for n in names)

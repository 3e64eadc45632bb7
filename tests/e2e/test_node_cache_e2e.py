"""Case 2 and case 5 with `nodeCacheCapable: true`: kube-scheduler sends node names
only (and victims as UIDs), and the extender's Nodes and Pods come from its own list +
watch of the API server (`--kubeconfig`, no `--cluster` file).
"""

from __future__ import annotations

from tests.e2e.cluster import Harness, node_object, pod_object
from tests.e2e.test_extender_e2e import digit_of, instances_by_pod, start, verbs_served


def test_node_names_with_the_watched_view(harness: Harness) -> None:
    """Pods land where NodeNumber says over nodes the extender learnt from its watch,
    including nodes added after it started (a file-less extender could not know them)."""
    cluster = harness.cluster
    cluster.create_nodes(node_object(f"node-{i}") for i in range(7))
    extender, _entry = start(harness, entry={"node_cache_capable": True})
    cluster.create_nodes(node_object(f"node-{i}") for i in range(7, 10))
    names = cluster.create_pods(pod_object(f"names-{i}") for i in range(100))
    bound = cluster.wait_bound(names, timeout_s=180)
    wrong = {pod: node for pod, node in bound.items() if digit_of(pod) != digit_of(node)}
    assert not wrong, sorted(wrong.items())[:10]
    records = extender.log_records()
    assert any(r.get("event") == "extender.view_synced" for r in records)
    created = sorted(str(r.get("pod")) for r in records if r.get("event") == "bind.api_created")
    assert created == sorted(f"default/{n}" for n in names)


def test_node_relabelled_and_deleted_during_a_run(harness: Harness) -> None:
    """A node deleted during a run is no longer offered; one relabelled is seen as such by
    the next cycle (a nodeSelector on the new label finds it)."""
    cluster = harness.cluster
    cluster.create_nodes(node_object(f"node-{i}") for i in range(10))
    _extender, _entry = start(harness, entry={"node_cache_capable": True})
    first = cluster.create_pods(pod_object(f"before-{i}") for i in range(10))
    cluster.wait_bound(first, timeout_s=120)
    cluster.core.delete_node("node-3")
    cluster.core.patch_node("node-5", {"metadata": {"labels": {"e2e/relabelled": "yes"}}})
    selected = cluster.create_pods([pod_object("selected-5", extra_spec={"nodeSelector": {"e2e/relabelled": "yes"}})])
    after = cluster.create_pods(pod_object(f"after-{i}") for i in (3, 13, 4))
    bound = cluster.wait_bound(selected + after[2:], timeout_s=120)
    assert bound["selected-5"] == "node-5"
    assert bound["after-4"] == "node-4"
    # Pods that would have scored node-3 go elsewhere or wait: never to a deleted node.
    placements = cluster.placements()
    assert all(placements.get(pod) != "node-3" for pod in after)


def test_preemption_meta_victims(harness: Harness) -> None:
    """Case 5 with victims as UIDs (`NodeNameToMetaVictims`): the extender finds the
    victims in its watched view, the guest is consulted, the preemptor is bound."""
    cluster = harness.cluster
    cluster.create_priority_class("e2e-meta-low", 10)
    cluster.create_priority_class("e2e-meta-high", 1000)
    try:
        cluster.create_nodes([node_object("node-1", cpu="1")])
        extender, _entry = start(harness, entry={"node_cache_capable": True})
        cluster.create_pods([pod_object("low-1", cpu="800m", priority_class="e2e-meta-low")])
        cluster.wait_bound(["low-1"], timeout_s=60)
        cluster.create_pods([pod_object("high-1", cpu="500m", priority_class="e2e-meta-high")])
        bound = cluster.wait_bound(["high-1"], timeout_s=120)
        assert bound["high-1"] == "node-1"
        assert cluster.pod("low-1") is None
        assert verbs_served(extender).get("preempt", 0) >= 1
        served = instances_by_pod(extender, "Checker")["high-1"]
        assert "removepod" in served, sorted(served)
    finally:
        for name in ("e2e-meta-low", "e2e-meta-high"):
            cluster.scheduling.delete_priority_class(name)

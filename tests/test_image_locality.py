"""ImageLocality, as kube-scheduler 1.33 scores."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import pytest

from tests.framework_support import cluster, config, node, pod, run
from wasm_scheduler.adapters.framework.cycle_state import CycleState
from wasm_scheduler.adapters.framework.handle import SchedulerHandle
from wasm_scheduler.adapters.framework.plugins.base import PluginContext
from wasm_scheduler.adapters.framework.plugins.image_locality import (
    MB,
    ImageLocality,
    calculate_priority,
    normalized_image_name,
)
from wasm_scheduler.adapters.framework.resources import Resources
from wasm_scheduler.adapters.framework.snapshot import NodeInfo, Snapshot


def image_node(name: str, *images: tuple[Sequence[str], int]) -> dict[str, Any]:
    """image_locality_test.go's makeImageNode: a node whose status lists images (names, size in MB)."""
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                       "images": [{"names": list(names), "sizeBytes": size * MB} for names, size in images]}}


def image_pod(*images: str, init: Sequence[str] = ()) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": f"c{i}", "image": image} for i, image in enumerate(images)]}
    if init:
        spec["initContainers"] = [{"name": f"i{i}", "image": image} for i, image in enumerate(init)]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"}, "spec": spec}


def snapshot_plugin(nodes: Sequence[dict[str, Any]]) -> tuple[ImageLocality, list[NodeInfo]]:
    """The plugin with a scheduler's snapshot of `nodes` (cache.NewSnapshot(nil, nodes))."""
    infos = [NodeInfo.of(n, Resources.from_list(n["status"]["allocatable"])) for n in nodes]
    snapshot = Snapshot(infos)
    snapshot.update_view()
    ctx = PluginContext("ImageLocality", {}, SchedulerHandle(snapshot), framework=None)  # type: ignore[arg-type]
    return ImageLocality(ctx), infos


# The node statuses of image_locality_test.go.
NODE_403002000 = ((["gcr.io/40:latest", "gcr.io/40:v1", "gcr.io/40:v1"], 40),
                  (["gcr.io/300:latest", "gcr.io/300:v1"], 300), (["gcr.io/2000:latest"], 2000))
NODE_25010 = ((["gcr.io/250:latest"], 250), (["gcr.io/10:latest", "gcr.io/10:v1"], 10))
NODE_60040900 = ((["gcr.io/600:latest"], 600), (["gcr.io/40:latest"], 40), (["gcr.io/900:latest"], 900))
NODE_300600900 = ((["gcr.io/300:latest"], 300), (["gcr.io/600:latest"], 600), (["gcr.io/900:latest"], 900))
NODE_400030 = ((["gcr.io/4000:latest"], 4000), (["gcr.io/30:latest"], 30))
NODE_203040 = ((["gcr.io/20:latest"], 20), (["gcr.io/30:latest"], 30), (["gcr.io/40:latest"], 40))
NO_IMAGES: tuple[tuple[list[str], int], ...] = ()

# image_locality_test.go, TestImageLocalityPriority: (name, pod's images, init images, node statuses, scores).
CASES = [
    ("two images spread on two nodes, prefer the larger image one", ["gcr.io/40", "gcr.io/250"], [],
     [NODE_403002000, NODE_25010], [0, 5]),
    ("two images on one node, prefer this node", ["gcr.io/40", "gcr.io/300"], [],
     [NODE_403002000, NODE_25010], [7, 0]),
    ("if exceed limit, use limit", ["gcr.io/10", "gcr.io/4000"], [], [NODE_400030, NODE_25010], [100, 0]),
    ("if exceed limit, use limit (with node which has no images present)", ["gcr.io/10", "gcr.io/4000"], [],
     [NODE_400030, NODE_25010, NO_IMAGES], [66, 0, 0]),
    ("pod with multiple large images, node2 is preferred", ["gcr.io/300", "gcr.io/600", "gcr.io/900"], [],
     [NODE_60040900, NODE_300600900, NO_IMAGES], [32, 36, 0]),
    ("pod with multiple small images", ["gcr.io/30", "gcr.io/40"], [], [NODE_203040, NODE_400030], [1, 0]),
    ("include InitContainers: two images spread on two nodes, prefer the larger image one", ["gcr.io/30"],
     ["gcr.io/300"], [NODE_403002000, NODE_203040], [6, 0]),
]


@pytest.mark.parametrize(("name", "images", "init", "statuses", "expected"), CASES, ids=[c[0] for c in CASES])
def test_image_locality_priority(name, images, init, statuses, expected):
    """image_locality_test.go, TestImageLocalityPriority (the Go test's expected scores)."""
    nodes = [image_node(f"node{i + 1}", *status) for i, status in enumerate(statuses)]
    plugin, infos = snapshot_plugin(nodes)
    p = image_pod(*images, init=init)
    assert [plugin.score(CycleState(), p, n) for n in infos] == expected
    assert [s.score for s in plugin.score_nodes(CycleState(), p, infos).scores] == expected
    # Scoring only some nodes: the spread still counts every node of the snapshot.
    assert [s.score for s in plugin.score_nodes(CycleState(), p, infos[::-1]).scores] == expected[::-1]
    # Without a scheduler the nodes given are all the nodes (the Go test's snapshot is just them).
    alone = ImageLocality()
    assert [s.score for s in alone.score_nodes(CycleState(), p, infos).scores] == expected


def fake_digest(content: str) -> str:
    return "sha256:" + hashlib.sha256(content.encode()).hexdigest()


@pytest.mark.parametrize(("given", "normalized"), [
    ("root", "root:latest"),  # "add :latest postfix 1"
    ("gcr.io:5000/root", "gcr.io:5000/root:latest"),  # "add :latest postfix 2"
    ("root:tag", "root:tag"),  # "keep it as is 1"
    ("root@" + fake_digest("root"), "root@" + fake_digest("root")),  # "keep it as is 2"
])
def test_normalized_image_name(given, normalized):
    """image_locality_test.go, TestNormalizedImageName."""
    assert normalized_image_name(given) == normalized


def test_no_registry_is_added_to_a_short_name():
    """normalizedImageName adds only ":latest": "nginx" is "nginx:latest", not the
    "docker.io/library/nginx:latest" a containerd node reports (kube-scheduler's TODO)."""
    big = 500
    nodes = [image_node("short", (["nginx:latest"], big)),
             image_node("long", (["docker.io/library/nginx:latest"], big))]
    plugin, infos = snapshot_plugin(nodes)
    scores = [s.score for s in plugin.score_nodes(CycleState(), image_pod("nginx"), infos).scores]
    # short: 500 MiB * 1/2 = 250 MiB -> 100 * (250 - 23) / (1000 - 23) = 23 (computed from the formula)
    assert scores == [23, 0]


def test_calculate_priority_bounds():
    """calculatePriority: below 23 MiB 0, at or above 1000 MiB per container 100."""
    assert calculate_priority(0, 1) == 0 and calculate_priority(23 * MB, 1) == 0
    assert calculate_priority(1000 * MB, 1) == 100 and calculate_priority(5000 * MB, 2) == 100
    assert calculate_priority(0, 0) == 0  # a pod without containers


def test_bound_pods_pull_no_images_onto_their_nodes_from_cycle_to_cycle(compiler):
    """Regression (kube-scheduler 1.33 on a 60-node snapshot gave 14 where simulate gave 18,
    and 18 to nodes without the image): a node's images are only its status.images, as
    kube-scheduler's cache has them; binding a pod does not add its image to its node.
    Several pods with the image, through the real Scheduler (one long-lived plugin, its
    counts kept from cycle to cycle while nodes change), spill over onto nodes without
    it: on every cycle the image is still on 2 of 5 nodes and scores the same."""
    image = "registry.example/app:1.0"
    nodes = [node(f"n{i}", cpu="4", images=[(image, 400 * MB)] if i < 2 else []) for i in range(5)]
    pods = [pod(f"p{i}", cpu="1500m", image=image) for i in range(8)]
    keys = frozenset(f"default/p{i}" for i in range(8))
    report = run(config(), cluster(*nodes, *pods), compiler, explain=keys)
    # 400 MiB on 2 of all 5 nodes: 160 MiB -> 100 * (160 - 23) / (1000 - 23) = 14 (from the formula)
    expected = {"n0": 14, "n1": 14, "n2": 0, "n3": 0, "n4": 0}
    placed = []
    for key in sorted(keys):
        outcome = report.outcome(key)
        assert outcome is not None and outcome.node is not None, key
        placed.append(outcome.node)
        for trace in outcome.traces:
            scored = {name: t.scores["ImageLocality"][1] for name, t in trace.nodes.items()
                      if "ImageLocality" in t.scores}
            assert scored == {name: expected[name] for name in scored}, key
    assert set(placed) - {"n0", "n1"}  # some pods were bound on nodes without the image


def test_the_plugin_reads_again_a_node_whose_dict_changed():
    nodes = [image_node("a", (["app:1"], 800)), image_node("b")]
    plugin, infos = snapshot_plugin(nodes)
    p = image_pod("app:1")
    assert [s.score for s in plugin.score_nodes(CycleState(), p, infos).scores] == [38, 0]  # 400 MiB on a
    changed = [image_node("a", (["app:1"], 800)), image_node("b", (["app:1"], 800))]
    plugin2_infos = [NodeInfo.of(n, Resources.from_list(n["status"]["allocatable"])) for n in changed]
    snapshot = Snapshot(plugin2_infos)
    snapshot.update_view()
    assert plugin.ctx is not None
    plugin.ctx.handle = SchedulerHandle(snapshot)  # the same plugin, a new snapshot
    # 800 MiB on both nodes: 800 MiB -> 100 * (800 - 23) / (1000 - 23) = 79 (computed from the formula)
    assert [s.score for s in plugin.score_nodes(CycleState(), p, plugin2_infos).scores] == [79, 79]

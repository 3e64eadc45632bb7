"""ImageLocality: favour nodes that already have the pod's container images.

This module owns kube-scheduler's plugin of that name (v1.33, ``image_locality.go``).
Each image of the pod's init containers and containers (its name normalized as
kube-scheduler does: ":latest" added when the name has no tag or digest; no registry
or "library/" is added, so "nginx" matches a node's "nginx:latest" but not
"docker.io/library/nginx:latest") that the node reports in status.images adds its
size scaled by its spread, ``int(size * nodes having it / all nodes)``; the sum,
clamped to [23 MiB, 1000 MiB x number of containers], is mapped linearly onto
[0, 100]. There is no NormalizeScore; its weight in the default profile is 1.

The nodes counted are all the nodes of the cycle's snapshot, not only the feasible
ones. How many nodes have each image is kept up to date from node to node as the
snapshot changes (node dicts are replaced, never edited), so a pod costs one pass
over the snapshot's node list plus one look-up per feasible node and image.

See `docs/framework.md` ("ImageLocality").
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from wasm_scheduler.adapters.framework.cycle_state import CycleState
from wasm_scheduler.adapters.framework.plugins.base import NativePlugin, PluginContext
from wasm_scheduler.adapters.framework.pods import KubeObject
from wasm_scheduler.adapters.framework.snapshot import NodeInfo
from wasm_scheduler.framework_api import MAX_NODE_SCORE, SUCCESS, ScoreResult

MB = 1024 * 1024
#: The bounds of an image's contribution (kube's minThreshold, maxContainerThreshold).
MIN_THRESHOLD = 23 * MB
MAX_CONTAINER_THRESHOLD = 1000 * MB


def normalized_image_name(name: str) -> str:
    """kube's normalizedImageName: ":latest" appended unless the last ':' follows the last '/'."""
    if name.rfind(":") <= name.rfind("/"):
        return name + ":latest"
    return name


def pod_image_names(pod: KubeObject) -> tuple[list[str], int]:
    """(the normalized image of each init container and container, how many containers)."""
    spec = pod.get("spec") or {}
    containers = [*(spec.get("initContainers") or ()), *(spec.get("containers") or ())]
    return [normalized_image_name(str(c.get("image") or "")) for c in containers], len(containers)


def calculate_priority(sum_scores: int, num_containers: int) -> int:
    """kube's calculatePriority: the clamped sum mapped onto [0, MaxNodeScore] (Go's integer division)."""
    max_threshold = MAX_CONTAINER_THRESHOLD * num_containers
    if sum_scores < MIN_THRESHOLD:
        sum_scores = MIN_THRESHOLD
    elif sum_scores > max_threshold:
        sum_scores = max_threshold
    numerator = MAX_NODE_SCORE * (sum_scores - MIN_THRESHOLD)
    denominator = max_threshold - MIN_THRESHOLD
    quotient = abs(numerator) // abs(denominator)  # Go truncates toward zero
    return quotient if (numerator >= 0) == (denominator > 0) else -quotient


class ImageLocality(NativePlugin):
    NAME = "ImageLocality"

    def __init__(self, ctx: PluginContext | None = None, name: str = "") -> None:
        super().__init__(ctx, name)
        self._lock = threading.Lock()
        #: The nodes `_counts` counts (a snapshot view's node list, compared node by node).
        self._seen: Sequence[NodeInfo] = ()
        #: Node name -> (the node dict, its image name -> size) of every node of `_seen`.
        self._counted: dict[str, tuple[KubeObject, dict[str, int]]] = {}
        #: Image name -> how many nodes of `_seen` have it.
        self._counts: dict[str, int] = {}
        #: Node name -> (node dict, images) of a scored node that is not the one counted.
        self._others: dict[str, tuple[KubeObject, dict[str, int]]] = {}

    def images_of(self, node: NodeInfo) -> dict[str, int]:
        """The node's image name -> size, read from its dict once per version of the dict."""
        for cache in (self._counted, self._others):
            cached = cache.get(node.name)
            if cached is not None and cached[0] is node.node:
                return cached[1]
        images = node.images()
        self._others[node.name] = (node.node, images)
        return images

    def _count(self, all_nodes: Sequence[NodeInfo]) -> dict[str, int]:
        """Image name -> how many of `all_nodes` have it. A snapshot view lists the same nodes
        in the same order from cycle to cycle and replaces a NodeInfo (and its node dict) only
        when it changes, so only the changed nodes are read again. Called under the lock."""
        seen = self._seen
        if len(seen) != len(all_nodes):
            return self._recount(all_nodes)
        counted, counts = self._counted, self._counts
        for old, new in zip(seen, all_nodes, strict=True):
            if old is new:
                continue
            if old.name != new.name:
                return self._recount(all_nodes)
            if old.node is new.node:
                continue
            for image in counted[old.name][1]:
                counts[image] -= 1
            images = self.images_of(new)
            counted[new.name] = (new.node, images)
            for image in images:
                counts[image] = counts.get(image, 0) + 1
        self._seen = all_nodes
        return counts

    def _recount(self, all_nodes: Sequence[NodeInfo]) -> dict[str, int]:
        counted: dict[str, tuple[KubeObject, dict[str, int]]] = {}
        counts: dict[str, int] = {}
        for node in all_nodes:
            images = self.images_of(node)
            counted[node.name] = (node.node, images)
            for image in images:
                counts[image] = counts.get(image, 0) + 1
        self._seen, self._counted, self._counts = all_nodes, counted, counts
        return counts

    def _all_nodes(self, nodes: Sequence[NodeInfo]) -> Sequence[NodeInfo]:
        """The nodes of the cycle's snapshot view, or `nodes` for a plugin made without a
        scheduler (the nodes given are then all the nodes)."""
        snapshot = getattr(self.ctx.handle if self.ctx is not None else None, "snapshot", None)
        if snapshot is None:
            return nodes
        all_nodes: Sequence[NodeInfo] = snapshot.view.node_infos
        return all_nodes

    def score(self, state: CycleState, pod: KubeObject, node: NodeInfo) -> int:
        return self.score_nodes(state, pod, [node]).scores[0].score

    def score_nodes(self, state: CycleState, pod: KubeObject, nodes: Sequence[NodeInfo]) -> ScoreResult:
        images, num_containers = pod_image_names(pod)
        names = [node.name for node in nodes]
        all_nodes = self._all_nodes(nodes)
        total = len(all_nodes)
        with self._lock:
            counts = self._counts if all_nodes is self._seen else self._count(all_nodes)
            # kube's scaledImageScore: int(float64(size) * (float64(numNodes) / float64(totalNodes))).
            share = {image: float(counts[image]) / float(total) for image in dict.fromkeys(images)
                     if counts.get(image)}
            if not share:  # no node has any of the pod's images: every node scores 0
                return ScoreResult.from_columns(SUCCESS, names, [0] * len(nodes), copy=False)
            wanted = [(image, share.get(image, 1.0 / total)) for image in images]
            counted = self._counted
            scores = []
            for node in nodes:
                cached = counted.get(node.name)
                node_images = cached[1] if cached is not None and cached[0] is node.node else self.images_of(node)
                total_score = 0
                for image, spread in wanted:
                    size = node_images.get(image)
                    if size is not None:
                        total_score += int(float(size) * spread)
                scores.append(calculate_priority(total_score, num_containers) if total_score else 0)
        return ScoreResult.from_columns(SUCCESS, names, scores, copy=False)

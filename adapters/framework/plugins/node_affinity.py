"""NodeAffinity: required node affinity and nodeSelector filter, preferred terms score.

PreFilter skips the plugin for a pod with neither a nodeSelector nor a required node
affinity, and narrows the candidate nodes when every required term names nodes
through ``matchFields`` ``metadata.name In``. Filter rejects nodes that do not match
(UnschedulableAndUnresolvable). Score adds the weights of the preferred terms a node
matches, normalized to [0, 100]; its weight in the default profile is 2.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from wasm_scheduler.adapters.framework.cycle_state import CycleState
from wasm_scheduler.adapters.framework.plugins.base import NativePlugin, default_normalize
from wasm_scheduler.adapters.framework.plugins.matching import labels_match, node_selector_matches, term_matches
from wasm_scheduler.adapters.framework.pods import KubeObject
from wasm_scheduler.adapters.framework.snapshot import NodeInfo
from wasm_scheduler.framework_api import (
    SUCCESS,
    ActionType,
    ClusterEvent,
    Code,
    NodeScore,
    NormalizeScoreResult,
    PreFilterResult,
    Resource,
    ScoreResult,
    Status,
)

REASON = "node(s) didn't match Pod's node affinity/selector"
REASON_CONFLICT = "pod affinity terms conflict"
_PREFER_KEY = "PreScoreNodeAffinity"


def _node_affinity(pod: KubeObject) -> Mapping[str, Any]:
    return ((pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {}


def required_selector(pod: KubeObject) -> Mapping[str, Any] | None:
    return _node_affinity(pod).get("requiredDuringSchedulingIgnoredDuringExecution")


def node_names_from_fields(selector: Mapping[str, Any]) -> set[str] | None:
    """Nodes the required terms name through metadata.name In; None if any term names none."""
    names: set[str] = set()
    for term in selector.get("nodeSelectorTerms") or ():
        term_names: set[str] | None = None
        for field in term.get("matchFields") or ():
            if field.get("key") == "metadata.name" and field.get("operator") == "In":
                values = {str(v) for v in field.get("values") or ()}
                term_names = values if term_names is None else term_names & values
        if term_names is None:
            return None
        names |= term_names
    return names


def _preferred_weight(preferred: Sequence[Mapping[str, Any]], node: KubeObject) -> int:
    """The weights of the preferred terms the node matches, added."""
    return sum(int(p.get("weight") or 0) for p in preferred if term_matches(p.get("preference") or {}, node))


class NodeAffinity(NativePlugin):
    NAME = "NodeAffinity"

    def pre_filter(self, state: CycleState, pod: KubeObject) -> PreFilterResult:
        required = required_selector(pod)
        if required is None and not (pod.get("spec") or {}).get("nodeSelector"):
            return PreFilterResult(Status(Code.SKIP, "", self.name))
        if required is not None:
            names = node_names_from_fields(required)
            if names is not None:
                if not names:
                    return PreFilterResult(Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, REASON_CONFLICT, self.name))
                return PreFilterResult(SUCCESS, frozenset(names))
        return PreFilterResult(SUCCESS)

    def filter_nodes(self, state: CycleState, pod: KubeObject, nodes: Sequence[NodeInfo]) -> dict[str, Status]:
        selector = (pod.get("spec") or {}).get("nodeSelector") or {}  # the pod read once for all nodes
        required = required_selector(pod)
        rejected = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, REASON, self.name)
        return {node.name: SUCCESS if ((not selector or labels_match(selector, node.node))
                                       and (required is None or node_selector_matches(required, node.node)))
                else rejected for node in nodes}

    def pre_score(self, state: CycleState, pod: KubeObject, nodes: Sequence[NodeInfo]) -> Status:
        preferred = _node_affinity(pod).get("preferredDuringSchedulingIgnoredDuringExecution") or ()
        if not preferred:
            return Status(Code.SKIP, "", self.name)
        state.write(_PREFER_KEY, list(preferred))
        return SUCCESS

    def _preferred(self, state: CycleState, pod: KubeObject) -> Sequence[Mapping[str, Any]]:
        preferred = state.get(_PREFER_KEY)
        if preferred is None:
            preferred = _node_affinity(pod).get("preferredDuringSchedulingIgnoredDuringExecution") or ()
        return preferred  # type: ignore[no-any-return]

    def score(self, state: CycleState, pod: KubeObject, node: NodeInfo) -> int | Status:
        return _preferred_weight(self._preferred(state, pod), node.node)

    def score_nodes(self, state: CycleState, pod: KubeObject, nodes: Sequence[NodeInfo]) -> ScoreResult:
        preferred = self._preferred(state, pod)
        return ScoreResult.from_columns(SUCCESS, [node.name for node in nodes],
                                        [_preferred_weight(preferred, node.node) for node in nodes], copy=False)

    def normalize_score(self, state: CycleState, pod: KubeObject, scores: Sequence[NodeScore]) -> NormalizeScoreResult:
        return NormalizeScoreResult(SUCCESS, default_normalize(scores))

    def events_to_register(self) -> tuple[ClusterEvent, ...]:
        return (ClusterEvent(Resource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL),)

"""The plugin contract, and the base class native plugins build on.

This module owns `Plugin`, the protocol the framework calls: the extension points of
kube-scheduler as snake_case methods with the signatures `adapters.wasm_plugin.WasmPlugin`
has, so native and wasm plugins are called alike (Filter and Score batched over the
candidate nodes). `NativePlugin` implements every method as a no-op and reports the
extension points a subclass overrides as implemented; a subclass may override the
per-node `filter`/`score` instead of the batched forms (a plugin that overrides only
`filter_nodes` answers a per-node `filter` through it). `PluginContext` is what a
plugin factory gets: its name, its args, the framework handle and the profile.

See `docs/framework.md` ("The plugins `simulate` runs").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar

from wasm_scheduler.adapters.framework.cycle_state import CycleState
from wasm_scheduler.adapters.framework.errors import UserError
from wasm_scheduler.adapters.framework.pods import KubeObject
from wasm_scheduler.adapters.framework.snapshot import NodeInfo
from wasm_scheduler.framework_api import (
    DEFAULT_CLUSTER_EVENTS,
    MAX_NODE_SCORE,
    POINT_NAMES,
    POINTS,
    SUCCESS,
    ClusterEvent,
    Code,
    NamedNode,
    NodeScore,
    NormalizeScoreResult,
    PermitResult,
    PostFilterResult,
    PreFilterResult,
    ScoreResult,
    Status,
    node_scores,
)

if TYPE_CHECKING:
    from wasm_scheduler.adapters.framework.framework import Framework
    from wasm_scheduler.adapters.framework.handle import SchedulerHandle
    from wasm_scheduler.adapters.framework.queue import QueuedPod

#: Every extension point, in kube-scheduler's order.
EXTENSION_POINTS: tuple[str, ...] = POINT_NAMES


#: The node type a plugin takes (see `Plugin`).
NodeT_contra = TypeVar("NodeT_contra", bound=NamedNode, contravariant=True)


class Plugin(Protocol[NodeT_contra]):
    """What the framework calls; `WasmPlugin` and `NativePlugin` both are one.

    Arguments are positional: implementations name them as they like. The nodes a plugin
    is given are of the type it is generic in: a `NativePlugin` is a `Plugin[NodeInfo]`;
    a `WasmPlugin` reads only node names, so it is a plugin of any `NamedNode`.
    """

    name: str

    def implements(self, point: str, /) -> bool: ...
    def pre_filter(self, state: CycleState, pod: KubeObject, /) -> PreFilterResult: ...
    def filter_nodes(self, state: CycleState, pod: KubeObject, nodes: Sequence[NodeT_contra],
                     /) -> dict[str, Status]: ...
    def add_pod(self, state: CycleState, pod: KubeObject, pod_to_add: KubeObject, node_info: NodeT_contra,
                /) -> Status: ...
    def remove_pod(self, state: CycleState, pod: KubeObject, pod_to_remove: KubeObject, node_info: NodeT_contra,
                   /) -> Status: ...
    def post_filter(self, state: CycleState, pod: KubeObject, statuses: Mapping[str, Status],
                    /) -> PostFilterResult: ...
    def pre_score(self, state: CycleState, pod: KubeObject, nodes: Sequence[NodeT_contra], /) -> Status: ...
    def score_nodes(self, state: CycleState, pod: KubeObject, nodes: Sequence[NodeT_contra], /) -> ScoreResult: ...
    def normalize_score(self, state: CycleState, pod: KubeObject, scores: Sequence[NodeScore],
                        /) -> NormalizeScoreResult: ...
    def reserve(self, state: CycleState, pod: KubeObject, node_name: str, /) -> Status: ...
    def unreserve(self, state: CycleState, pod: KubeObject, node_name: str, /) -> None: ...
    def permit(self, state: CycleState, pod: KubeObject, node_name: str, /) -> PermitResult: ...
    def pre_bind(self, state: CycleState, pod: KubeObject, node_name: str, /) -> Status: ...
    def bind(self, state: CycleState, pod: KubeObject, node_name: str, /) -> Status: ...
    def post_bind(self, state: CycleState, pod: KubeObject, node_name: str, /) -> None: ...
    def events_to_register(self, /) -> tuple[ClusterEvent, ...]: ...
    def close(self, /) -> None: ...


@dataclass
class PluginContext:
    """What a plugin factory gets."""

    name: str
    args: Mapping[str, Any]
    handle: SchedulerHandle
    framework: Framework[NodeInfo]
    #: Where the args came from, for error messages ("sched.yaml: profile x: pluginConfig[2].args").
    source: str = ""

    def fail(self, field: str, problem: str) -> UserError:
        return UserError(f"{self.source or self.name}: {field}: {problem}")


#: Extension point -> the methods whose override means the point is implemented.
_OVERRIDES: Mapping[str, tuple[str, ...]] = {point.name: point.methods for point in POINTS}


class NativePlugin:
    """A plugin written in Python; subclasses override the extension points they have."""

    #: The plugin's registered name (an instance may be given another).
    NAME: ClassVar[str] = ""

    def __init__(self, ctx: PluginContext | None = None, name: str = "") -> None:
        self.name = name or (ctx.name if ctx else "") or self.NAME or type(self).__name__
        self.ctx = ctx

    def implements(self, point: str) -> bool:
        methods = _OVERRIDES.get(point, ())
        cls = type(self)
        return any(getattr(cls, m) is not getattr(NativePlugin, m) for m in methods)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"

    # --- QueueSort ---------------------------------------------------------------------

    def less(self, a: QueuedPod, b: QueuedPod) -> bool:
        return a.timestamp < b.timestamp

    # --- scheduling cycle --------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: KubeObject) -> PreFilterResult:
        return PreFilterResult(SUCCESS)

    def filter(self, state: CycleState, pod: KubeObject, node: NodeInfo) -> Status:
        """One node; a subclass that overrides only `filter_nodes` answers through it."""
        if type(self).filter_nodes is not NativePlugin.filter_nodes:
            return self.filter_nodes(state, pod, (node,))[node.name]
        return SUCCESS

    def filter_nodes(self, state: CycleState, pod: KubeObject, nodes: Sequence[NodeInfo]) -> dict[str, Status]:
        return {node.name: self.filter(state, pod, node) for node in nodes}

    def add_pod(self, state: CycleState, pod: KubeObject, pod_to_add: KubeObject, node_info: NodeInfo) -> Status:
        return SUCCESS

    def remove_pod(self, state: CycleState, pod: KubeObject, pod_to_remove: KubeObject,
                   node_info: NodeInfo) -> Status:
        return SUCCESS

    def post_filter(self, state: CycleState, pod: KubeObject, statuses: Mapping[str, Status]) -> PostFilterResult:
        return PostFilterResult(Status(Code.UNSCHEDULABLE, "", self.name))

    def pre_score(self, state: CycleState, pod: KubeObject, nodes: Sequence[NodeInfo]) -> Status:
        return SUCCESS

    def score(self, state: CycleState, pod: KubeObject, node: NodeInfo) -> int | Status:
        """The node's score, or a Status when scoring failed."""
        return 0

    def score_nodes(self, state: CycleState, pod: KubeObject, nodes: Sequence[NodeInfo]) -> ScoreResult:
        scores = []
        for node in nodes:
            result = self.score(state, pod, node)
            if isinstance(result, Status):
                return ScoreResult(Status(result.code, f"node {node.name}: {result.reason}", self.name))
            scores.append(int(result))
        return ScoreResult.from_columns(SUCCESS, [node.name for node in nodes], scores, copy=False)

    def normalize_score(self, state: CycleState, pod: KubeObject, scores: Sequence[NodeScore]) -> NormalizeScoreResult:
        return NormalizeScoreResult(SUCCESS, tuple(scores))

    def reserve(self, state: CycleState, pod: KubeObject, node_name: str) -> Status:
        return SUCCESS

    def unreserve(self, state: CycleState, pod: KubeObject, node_name: str) -> None:
        return None

    def permit(self, state: CycleState, pod: KubeObject, node_name: str) -> PermitResult:
        return PermitResult(SUCCESS)

    # --- binding cycle -----------------------------------------------------------------

    def pre_bind(self, state: CycleState, pod: KubeObject, node_name: str) -> Status:
        return SUCCESS

    def bind(self, state: CycleState, pod: KubeObject, node_name: str) -> Status:
        return Status(Code.SKIP, "", self.name)

    def post_bind(self, state: CycleState, pod: KubeObject, node_name: str) -> None:
        return None

    # --- outside every cycle -----------------------------------------------------------

    def events_to_register(self) -> tuple[ClusterEvent, ...]:
        return DEFAULT_CLUSTER_EVENTS

    def close(self) -> None:
        """The framework shuts down."""


def default_normalize(scores: Sequence[NodeScore], reverse: bool = False,
                      max_priority: int = MAX_NODE_SCORE) -> tuple[NodeScore, ...]:
    """kube-scheduler's DefaultNormalizeScore: scale to [0, max], optionally reversed."""
    values = [s[1] for s in scores]
    top = max(values, default=0)
    if top == 0:
        if not reverse:
            return tuple(scores)
        return node_scores([s[0] for s in scores], repeat(max_priority))
    if reverse:
        scaled = [max_priority - max_priority * value // top for value in values]
    else:
        scaled = [max_priority * value // top for value in values]
    return node_scores([s[0] for s in scores], scaled)

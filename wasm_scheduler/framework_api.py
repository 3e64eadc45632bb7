"""The scheduling framework's vocabulary, shared by native and wasm plugins.

This module owns what a plugin and the framework say to each other, whatever the
plugin is written in: status codes and `Status`, the results of the extension points,
cluster events, `NamedNode` (what the framework reads of a node), a pod's `Cycle` and
the `Phase` a call belongs to, and `POINTS`, the one table of extension points (their
name, the guest export that implements each, the result, whether it runs per node,
whether it carries the pod's assignment lifecycle).
Every other table of extension points is derived from it. It sits at the bottom of the
layers and imports nothing of the project; the wasm ABI (export signatures, host
imports, packed results) lives in `registry.guest_abi` and `actors.abi`.

See `docs/guest-authors.md` ("Exports") for the status codes.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from typing import Final, Literal, NamedTuple, Protocol


class Code(enum.IntEnum):
    """kube-scheduler framework status codes, as the guest returns them."""

    SUCCESS = 0
    ERROR = 1
    UNSCHEDULABLE = 2
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3
    WAIT = 4
    SKIP = 5

    @classmethod
    def from_wire(cls, value: int) -> Code:
        """A guest's status word; an unknown code is an Error (the guest broke the ABI)."""
        return _BY_WIRE.get(value, cls.ERROR)

    @property
    def label(self) -> str:
        """The name kube-scheduler prints (``UnschedulableAndUnresolvable``)."""
        return _LABELS[self]


#: Status word -> Code: a dict lookup (one a call), not the enum's own lookup.
_BY_WIRE: Final[dict[int, Code]] = {code.value: code for code in Code}

_LABELS: Final = {
    Code.SUCCESS: "Success",
    Code.ERROR: "Error",
    Code.UNSCHEDULABLE: "Unschedulable",
    Code.UNSCHEDULABLE_AND_UNRESOLVABLE: "UnschedulableAndUnresolvable",
    Code.WAIT: "Wait",
    Code.SKIP: "Skip",
}


@dataclass(frozen=True, slots=True)
class Status:
    """The outcome of one extension-point call: a code, a reason and who said it."""

    code: Code = Code.SUCCESS
    reason: str = ""
    plugin: str = ""

    @property
    def ok(self) -> bool:
        return self.code == Code.SUCCESS

    @property
    def is_rejection(self) -> bool:
        return self.code in (Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)

    def with_plugin(self, plugin: str) -> Status:
        return self if self.plugin == plugin else Status(self.code, self.reason, plugin)

    def __str__(self) -> str:
        where = f" ({self.plugin})" if self.plugin else ""
        return f"{self.code.label}{where}: {self.reason}" if self.reason else self.code.label + where


SUCCESS: Final = Status()

#: The range a normalized score must fall in (kube-scheduler's MinNodeScore, MaxNodeScore).
MIN_NODE_SCORE: Final = 0
MAX_NODE_SCORE: Final = 100


class NominatingMode(enum.IntEnum):
    """What PostFilter asks of the pod's nominated node name."""

    NOOP = 0
    OVERRIDE = 1


# --- cluster events ------------------------------------------------------------------

class Resource(enum.IntEnum):
    POD = 0
    NODE = 1
    PERSISTENT_VOLUME = 2
    PERSISTENT_VOLUME_CLAIM = 3
    POD_SCHEDULING_CONTEXT = 4
    RESOURCE_CLAIM = 5
    STORAGE_CLASS = 6
    CSI_NODE = 7
    CSI_DRIVER = 8
    CSI_STORAGE_CAPACITY = 9
    WILDCARD = 10


class ActionType(enum.IntFlag):
    ADD = 1
    DELETE = 2
    UPDATE_NODE_ALLOCATABLE = 4
    UPDATE_NODE_LABEL = 8
    UPDATE_NODE_TAINT = 16
    UPDATE_NODE_CONDITION = 32
    ALL = 63


@dataclass(frozen=True, slots=True)
class ClusterEvent:
    resource: Resource | int
    action: ActionType | int


#: What a guest without `enqueue` (or returning no events) registers for.
DEFAULT_CLUSTER_EVENTS: Final = (
    ClusterEvent(Resource.POD, ActionType.ALL),
    ClusterEvent(Resource.NODE, ActionType.ALL),
    ClusterEvent(Resource.CSI_NODE, ActionType.ALL),
    ClusterEvent(Resource.PERSISTENT_VOLUME, ActionType.ALL),
    ClusterEvent(Resource.PERSISTENT_VOLUME_CLAIM, ActionType.ALL),
    ClusterEvent(Resource.STORAGE_CLASS, ActionType.ALL),
)


# --- results of the extension points -------------------------------------------------

@dataclass(frozen=True, slots=True)
class PreFilterResult:
    status: Status
    #: The node subset the guest asked for; None means all nodes.
    node_names: frozenset[str] | None = None


@dataclass(frozen=True, slots=True)
class PostFilterResult:
    status: Status
    nominated_node_name: str = ""
    mode: NominatingMode = NominatingMode.NOOP


class NodeScore(NamedTuple):
    """A node's score (a named tuple: made once per node per Score, so it must be cheap)."""

    name: str
    score: int


def node_scores(names: Iterable[str], scores: Iterable[int]) -> tuple[NodeScore, ...]:
    """NodeScores of `names` and `scores` paired in order, built without a Python-level call
    a node (`tuple.__new__` on each pair, as the named tuple's own constructor does). It stops
    at the shorter of the two (`scores` may be endless, `itertools.repeat(0)`)."""
    return tuple(map(tuple.__new__, repeat(NodeScore), zip(names, scores, strict=False)))


def score_columns(scores: Sequence[NodeScore]) -> tuple[Sequence[str], Sequence[int]]:
    """(names, scores) of NodeScores, side by side: the pairs transposed in C."""
    if not scores:
        return (), ()
    names, values = zip(*scores, strict=True)
    return names, values


class ScoreResult:
    """Score over many nodes: the scores of those that succeeded, or the first failure.

    Made from NodeScores, or (`from_columns`) from the nodes' names and their scores side
    by side, as a guest's Score gives them: then the NodeScores are built only if `scores`
    is read, and `pairs()` walks the two columns without making an object a node (the
    framework reads the pairs). Immutable, like the other results."""

    __slots__ = ("_status", "_scores", "_names", "_values")

    _status: Status
    _scores: tuple[NodeScore, ...] | None
    _names: Sequence[str]
    _values: Sequence[int]

    def __init__(self, status: Status, scores: Iterable[NodeScore] = ()) -> None:
        self._fill(status, tuple(scores), (), ())

    def _fill(self, status: Status, scores: tuple[NodeScore, ...] | None, names: Sequence[str],
              values: Sequence[int]) -> None:
        """Set the slots once (assignment is refused afterwards)."""
        _set = object.__setattr__
        _set(self, "_status", status)
        _set(self, "_scores", scores)
        _set(self, "_names", names)
        _set(self, "_values", values)

    @classmethod
    def from_columns(cls, status: Status, names: Sequence[str], values: Sequence[int], *,
                     copy: bool = True) -> ScoreResult:
        """`names[i]` scored `values[i]`. Both are copied, so the result does not change with
        them, unless `copy` is False: the caller then hands them over and never changes them
        (the guest host does, with the names of the call and the scores it just read)."""
        if copy:
            names, values = tuple(names), tuple(values)
        if len(names) != len(values):
            raise ValueError(f"ScoreResult: {len(names)} node names for {len(values)} scores")
        result = cls.__new__(cls)
        result._fill(status, None, names, values)
        return result

    def __reduce__(self) -> tuple[type[ScoreResult], tuple[Status, tuple[NodeScore, ...]]]:
        """Pickled and copied as its status and NodeScores (setting attributes is refused)."""
        return ScoreResult, (self._status, self.scores)

    @property
    def status(self) -> Status:
        return self._status

    @property
    def scores(self) -> tuple[NodeScore, ...]:
        scores = self._scores
        if scores is None:  # built once; two threads asking at once build equal tuples
            scores = node_scores(self._names, self._values)
            object.__setattr__(self, "_scores", scores)
        return scores

    def pairs(self) -> Iterable[tuple[str, int]]:
        """(node name, score) in order, without building NodeScores that do not exist yet."""
        if self._scores is not None:
            return self._scores
        return zip(self._names, self._values, strict=True)

    def columns(self) -> tuple[Sequence[str], Sequence[int]]:
        """(node names, their scores) side by side, in order: the framework's way to read a
        result (the columns as given, or split from the NodeScores)."""
        if self._scores is None:
            return self._names, self._values
        return score_columns(self._scores)

    def __len__(self) -> int:
        return len(self._scores) if self._scores is not None else len(self._names)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ScoreResult):
            return NotImplemented
        return self._status == other._status and self.scores == other.scores

    def __hash__(self) -> int:
        return hash((self._status, self.scores))

    def __repr__(self) -> str:
        return f"ScoreResult(status={self._status!r}, scores={self.scores!r})"

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"ScoreResult is immutable: cannot set {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"ScoreResult is immutable: cannot delete {name!r}")


@dataclass(frozen=True, slots=True)
class PreScoreAndScore:
    """PreScore, then Score over the same nodes if PreScore succeeded: one message for both
    (a PreScore that fails or says Skip leaves `score` None: Score does not run)."""

    prescore: Status
    score: ScoreResult | None = None


@dataclass(frozen=True, slots=True)
class NormalizeScoreResult:
    status: Status
    scores: tuple[NodeScore, ...] = ()


@dataclass(frozen=True, slots=True)
class PermitResult:
    status: Status
    timeout_ms: int = 0


@dataclass(frozen=True, slots=True)
class FilterResult:
    """Filter over many nodes: one status per node, in the order asked."""

    statuses: tuple[tuple[str, Status], ...] = field(default_factory=tuple)

    def as_dict(self) -> dict[str, Status]:
        return dict(self.statuses)


# --- the extension points ------------------------------------------------------------

#: A pod's cycle: its scheduling cycle, or its binding cycle (from Permit on).
Cycle = Literal["scheduling", "binding"]

#: The part of the scheduler's work a call belongs to (the `phase` of its log lines): a
#: pod's cycle, or "enqueue" (EventsToRegister, outside every pod's cycle).
Phase = Cycle | Literal["enqueue"]


class NamedNode(Protocol):
    """What the framework itself reads of a node it hands its plugins: the name. Native
    plugins take the framework's `NodeInfo`; wasm plugins need no more than this (the
    HTTP extender gives them lighter nodes)."""

    @property
    def name(self) -> str: ...


@dataclass(frozen=True, slots=True)
class ExtensionPoint:
    """One extension point of kube-scheduler's framework."""

    #: The framework's name for it (snake_case: "pre_filter").
    name: str
    #: kube-scheduler's name of each call it makes ("PreFilter"; "AddPod" and "RemovePod"
    #: for the PreFilter extensions), as the framework logs and times them.
    labels: tuple[str, ...]
    #: The guest exports that implement it (any one of them will do; none: a wasm guest cannot).
    exports: tuple[str, ...]
    #: The plugin methods a native plugin overrides to implement it (any one of them).
    methods: tuple[str, ...]
    #: What one call of the point answers (None: nothing).
    result: type | None
    #: The pod's cycle it runs in ("binding" for Unreserve too: it may come after Permit),
    #: or None (outside any pod's cycle).
    cycle: Cycle | None
    #: Called for each candidate node (batched over the nodes).
    per_node: bool = False
    #: Carries the pod's assignment lifecycle: a wasm plugin always takes part in it.
    lifecycle: bool = False
    #: Its field under a profile's ``plugins`` in KubeSchedulerConfiguration ("" when the
    #: configuration names no such field: it follows another point's plugins).
    config: str = ""


_S: Final = "scheduling"
_B: Final = "binding"

#: Every extension point, in kube-scheduler's order: the one table of them; every other
#: table of points is derived from it.
POINTS: Final[tuple[ExtensionPoint, ...]] = (
    ExtensionPoint("queue_sort", ("QueueSort",), (), ("less",), bool, None, config="queueSort"),
    ExtensionPoint("pre_filter", ("PreFilter",), ("prefilter",), ("pre_filter",), PreFilterResult, _S,
                   lifecycle=True, config="preFilter"),
    ExtensionPoint("filter", ("Filter",), ("filter",), ("filter", "filter_nodes"), FilterResult, _S,
                   per_node=True, config="filter"),
    ExtensionPoint("pre_filter_extensions", ("AddPod", "RemovePod"), ("addpod", "removepod"),
                   ("add_pod", "remove_pod"), Status, _S),
    ExtensionPoint("post_filter", ("PostFilter",), ("postfilter",), ("post_filter",), PostFilterResult, _S,
                   config="postFilter"),
    ExtensionPoint("pre_score", ("PreScore",), ("prescore",), ("pre_score",), Status, _S, config="preScore"),
    ExtensionPoint("score", ("Score",), ("score",), ("score", "score_nodes"), ScoreResult, _S, per_node=True,
                   config="score"),
    ExtensionPoint("normalize_score", ("NormalizeScore",), ("normalizescore",), ("normalize_score",),
                   NormalizeScoreResult, _S),
    ExtensionPoint("reserve", ("Reserve",), ("reserve",), ("reserve", "unreserve"), Status, _S, lifecycle=True,
                   config="reserve"),
    ExtensionPoint("unreserve", ("Unreserve",), ("unreserve",), ("reserve", "unreserve"), None, _B),
    ExtensionPoint("permit", ("Permit",), ("permit",), ("permit",), PermitResult, _S, lifecycle=True,
                   config="permit"),
    ExtensionPoint("pre_bind", ("PreBind",), ("prebind",), ("pre_bind",), Status, _B, config="preBind"),
    ExtensionPoint("bind", ("Bind",), ("bind",), ("bind",), Status, _B, config="bind"),
    ExtensionPoint("post_bind", ("PostBind",), ("postbind",), ("post_bind",), None, _B, lifecycle=True,
                   config="postBind"),
    ExtensionPoint("enqueue_extensions", ("EventsToRegister",), ("enqueue",), ("events_to_register",), tuple, None),
)

#: Every extension point's name, in kube-scheduler's order.
POINT_NAMES: Final[tuple[str, ...]] = tuple(point.name for point in POINTS)

#: KubeSchedulerConfiguration's per-point plugin sets -> the points they fill.
CONFIG_POINTS: Final[dict[str, str]] = {point.config: point.name for point in POINTS if point.config}

#: Points that carry the pod's assignment lifecycle.
LIFECYCLE_POINTS: Final[frozenset[str]] = frozenset(point.name for point in POINTS if point.lifecycle)

#: kube-scheduler's names of the calls of a pod's scheduling cycle, and of all calls of a
#: pod's cycles in kube-scheduler's order.
SCHEDULING_LABELS: Final[frozenset[str]] = frozenset(
    label for point in POINTS if point.cycle == "scheduling" for label in point.labels)
CYCLE_LABELS: Final[tuple[str, ...]] = tuple(label for point in POINTS if point.cycle for label in point.labels)

#: Guest exports that may run after Permit, in the pod's binding cycle.
BINDING_CYCLE_EXPORTS: Final[frozenset[str]] = frozenset(
    export for point in POINTS if point.cycle == "binding" for export in point.exports)

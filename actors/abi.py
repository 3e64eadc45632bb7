"""The guest ABI as data: status codes, export and import signatures, result types.

This module owns every fact of the contract between the host and a scheduler plugin
compiled to wasm (the ABI of kube-scheduler-wasm-extension): which exports a guest may
have and with which signature, which host functions it may import, how results are
packed, and the plain dataclasses the rest of the project uses for statuses and
results. It has no behaviour beyond decoding packed integers, so the loader
(`registry`), the guest host (`actors`) and the scheduler adapters share one source.
"""

from __future__ import annotations

import enum
import sys
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from typing import Final, NamedTuple


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



# --- exports -------------------------------------------------------------------------

I32: Final = "i32"
I64: Final = "i64"

#: Every extension-point export, with its result types (all take no parameters).
EXPORT_RESULTS: Final[dict[str, tuple[str, ...]]] = {
    "enqueue": (),
    "prefilter": (I32,),
    "filter": (I32,),
    "postfilter": (I64,),
    "prescore": (I32,),
    "score": (I64,),
    "normalizescore": (I32,),
    "reserve": (I32,),
    "unreserve": (),
    "permit": (I64,),
    "prebind": (I32,),
    "bind": (I32,),
    "postbind": (),
    "addpod": (I32,),
    "removepod": (I32,),
}

#: Exports that make no sense without another one.
COUPLED_EXPORTS: Final[dict[str, str]] = {"prescore": "score", "normalizescore": "score"}


class NominatingMode(enum.IntEnum):
    NOOP = 0
    OVERRIDE = 1


def split_i64(value: int) -> tuple[int, int]:
    """(low 32 bits, high 32 bits) of a wasm i64 given as a Python int of either sign."""
    value &= 0xFFFF_FFFF_FFFF_FFFF
    return value & 0xFFFF_FFFF, value >> 32


def decode_score(packed: int) -> tuple[int, int]:
    """score: (status word from the low 32 bits, signed int32 score from the high 32)."""
    signed = packed - (1 << 64) if packed >= 1 << 63 else packed  # wasm gives a signed i64
    return packed & 0xFFFF_FFFF, signed >> 32  # an arithmetic shift keeps the score's sign


def decode_postfilter(packed: int) -> tuple[int, NominatingMode]:
    """postfilter: (status word from the low 32 bits, nominating mode from the high 32)."""
    low, high = split_i64(packed)
    return low, NominatingMode.OVERRIDE if high == NominatingMode.OVERRIDE else NominatingMode.NOOP


def decode_permit(packed: int) -> tuple[int, int]:
    """permit: (status word from the HIGH 32 bits, wait timeout in ms from the low 32, uint32)."""
    low, high = split_i64(packed)
    return high, low


# --- imports -------------------------------------------------------------------------

WASI: Final = "wasi_snapshot_preview1"
K8S_API: Final = "k8s.io/api"
K8S_SCHEDULER: Final = "k8s.io/scheduler"
K8S_KLOG: Final = "k8s.io/klog"

#: (module, name) -> (params, results) of every host function the ABI defines.
HOST_IMPORTS: Final[dict[tuple[str, str], tuple[tuple[str, ...], tuple[str, ...]]]] = {
    (K8S_API, "node"): ((I32,) * 4, (I32,)),
    (K8S_API, "nodeList"): ((I32,) * 2, (I32,)),
    (K8S_SCHEDULER, "currentPod"): ((I32,) * 2, (I32,)),
    (K8S_SCHEDULER, "targetPod"): ((I32,) * 2, (I32,)),
    (K8S_SCHEDULER, "currentNodeName"): ((I32,) * 2, (I32,)),
    (K8S_SCHEDULER, "filteredNodeList"): ((I32,) * 2, (I32,)),
    (K8S_SCHEDULER, "nodeToStatusMap"): ((I32,) * 2, (I32,)),
    (K8S_SCHEDULER, "nodeScoreList"): ((I32,) * 2, (I32,)),
    (K8S_SCHEDULER, "nodeImageStates"): ((I32,) * 4, (I32,)),
    (K8S_SCHEDULER, "get_config"): ((I32,) * 2, (I32,)),
    (K8S_SCHEDULER, "result.status_reason"): ((I32,) * 2, ()),
    (K8S_SCHEDULER, "result.node_names"): ((I32,) * 2, ()),
    (K8S_SCHEDULER, "result.nominated_node_name"): ((I32,) * 2, ()),
    (K8S_SCHEDULER, "result.normalized_score_list"): ((I32,) * 2, ()),
    (K8S_SCHEDULER, "result.cluster_events"): ((I32,) * 2, ()),
    (K8S_SCHEDULER, "handle.eventrecorder.eventf"): ((I32,) * 2, ()),
    (K8S_SCHEDULER, "handle.reject_waiting_pod"): ((I32,) * 4, ()),
    (K8S_SCHEDULER, "handle.get_waiting_pod"): ((I32,) * 4, ()),
    (K8S_KLOG, "severity"): ((), (I32,)),
    (K8S_KLOG, "log"): ((I32,) * 3, ()),
    (K8S_KLOG, "logs"): ((I32,) * 5, ()),
}


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


#: Where the high 32 bits of an i64 sit among its two 32-bit halves in this host's order.
_HIGH_HALF = 1 if sys.byteorder == "little" else 0


def high_words(values: Sequence[int]) -> Sequence[int]:
    """The high, signed 32 bits of each i64 (the score of a packed Score result), split in
    C: the values as 32-bit halves, every other one."""
    packed = values if isinstance(values, array) else array("q", values)
    return array("i", packed.tobytes())[_HIGH_HALF::2]


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

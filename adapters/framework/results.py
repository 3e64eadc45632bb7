"""What a simulation reports: one outcome per pending pod, and why.

This module owns the result dataclasses: `PodOutcome` (status, node, reason and the
chosen node's score per plugin), `CycleTrace`/`NodeTrace` (for ``--explain``: each
node's filter result per plugin and score per plugin in one scheduling attempt),
`Preemption` (who was evicted for whom) and `SimulationReport` with the JSON shape
the CLI prints. They are plain data; the scheduler fills them in.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

PASSED = "passed"


class PodStatus(enum.StrEnum):
    SCHEDULED = "Scheduled"
    UNSCHEDULABLE = "Unschedulable"
    ERROR = "Error"


@dataclass
class NodeTrace:
    """One node in one scheduling attempt."""

    #: (plugin, "passed" or the status it returned), in the order the plugins ran.
    filters: list[tuple[str, str]] = field(default_factory=list)
    #: plugin -> (score after NormalizeScore, that times the plugin's weight).
    scores: dict[str, tuple[int, int]] = field(default_factory=dict)

    @property
    def feasible(self) -> bool:
        return bool(self.filters) and all(result == PASSED for _p, result in self.filters)

    @property
    def total(self) -> int | None:
        return sum(w for _s, w in self.scores.values()) if self.scores else None

    def to_json(self) -> dict[str, Any]:
        return {
            "filter": dict(self.filters),
            "feasible": self.feasible,
            "score": {p: s for p, (s, _w) in self.scores.items()},
            "finalScore": {p: w for p, (_s, w) in self.scores.items()},
            "total": self.total,
        }


@dataclass
class CycleTrace:
    """Everything one scheduling attempt of one pod decided, node by node."""

    attempt: int
    pre_filter: list[tuple[str, str]] = field(default_factory=list)
    #: Nodes PreFilter narrowed the search to (None: all).
    node_subset: list[str] | None = None
    #: The nominated node, tried alone first.
    nominated_node: str = ""
    nodes: dict[str, NodeTrace] = field(default_factory=dict)
    post_filter: str = ""
    pre_score: list[tuple[str, str]] = field(default_factory=list)
    weights: dict[str, int] = field(default_factory=dict)
    selected: str = ""
    outcome: str = ""

    def node(self, name: str) -> NodeTrace:
        trace = self.nodes.get(name)
        if trace is None:
            trace = self.nodes[name] = NodeTrace()
        return trace

    def to_json(self) -> dict[str, Any]:
        return {
            "attempt": self.attempt,
            "preFilter": dict(self.pre_filter),
            "nodeSubset": self.node_subset,
            "nominatedNode": self.nominated_node or None,
            "nodes": {name: trace.to_json() for name, trace in sorted(self.nodes.items())},
            "postFilter": self.post_filter or None,
            "preScore": dict(self.pre_score),
            "weights": self.weights,
            "selected": self.selected or None,
            "outcome": self.outcome,
        }


@dataclass
class PodOutcome:
    """The fate of one pending pod."""

    namespace: str
    name: str
    uid: str
    status: PodStatus = PodStatus.UNSCHEDULABLE
    node: str | None = None
    reason: str = ""
    #: The chosen node's score per plugin (normalized score times weight).
    scores: dict[str, int] = field(default_factory=dict)
    attempts: int = 0
    traces: list[CycleTrace] = field(default_factory=list)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def total_score(self) -> int | None:
        return sum(self.scores.values()) if self.scores else None

    def to_json(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "name": self.name,
            "uid": self.uid,
            "node": self.node,
            "status": str(self.status),
            "reason": self.reason,
            "scores": dict(self.scores),
        }


@dataclass(frozen=True)
class Preemption:
    victim: str
    preemptor: str
    node: str


@dataclass
class SimulationReport:
    """Every pending pod's outcome, in the order the snapshot listed them."""

    pods: list[PodOutcome]
    seconds: float
    preemptions: list[Preemption] = field(default_factory=list)
    #: Pending pods no profile schedules (their schedulerName is not configured).
    ignored: list[str] = field(default_factory=list)

    def count(self, status: PodStatus) -> int:
        return sum(1 for p in self.pods if p.status == status)

    def summary(self) -> dict[str, Any]:
        return {
            "scheduled": self.count(PodStatus.SCHEDULED),
            "unschedulable": self.count(PodStatus.UNSCHEDULABLE),
            "errors": self.count(PodStatus.ERROR),
            "seconds": round(self.seconds, 3),
        }

    def outcome(self, key: str) -> PodOutcome | None:
        return next((p for p in self.pods if p.key == key), None)

    def to_json(self) -> dict[str, Any]:
        return {"pods": [p.to_json() for p in self.pods], "summary": self.summary()}

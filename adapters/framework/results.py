"""What a simulation reports: one outcome per pending pod, and why.

This module owns the result dataclasses: `PodOutcome` (status, node, reason and the
chosen node's score per plugin), `CycleTrace`/`NodeTrace` (for ``--explain``: each
node's filter result per plugin and score per plugin in one scheduling attempt),
`Preemption` (who was evicted for whom), `Unmodelled` (what of a pod the simulation
does not check) and `SimulationReport` with the JSON shape the CLI prints. They are
plain data; the scheduler fills them in. `reason_counts` counts rejections by plugin
and reason (`reason_groups`), for the "0/N nodes are available" message and for
``--explain`` alike.

See `docs/framework.md` ("`--explain`").
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

PASSED = "passed"

#: How a status with several reasons separates them (each counts on its own in the message).
REASON_SEPARATOR = "; "


def reason_groups(rejections: Iterable[tuple[str, str, str]]) -> dict[tuple[str, str], list[str]]:
    """(plugin, reason) -> the nodes it rejected, from each rejected node's (node, plugin,
    status text); a text carrying several reasons (`REASON_SEPARATOR`) counts for each.
    The "0/N nodes are available" message and ``--explain`` both count with it."""
    groups: dict[tuple[str, str], list[str]] = {}
    for node, plugin, text in rejections:
        for reason in text.split(REASON_SEPARATOR):
            groups.setdefault((plugin, reason), []).append(node)
    return groups


@dataclass(frozen=True)
class RejectionGroup:
    """The nodes one plugin rejected for one reason in one scheduling attempt."""

    plugin: str
    reason: str
    nodes: list[str]


class PodStatus(enum.StrEnum):
    SCHEDULED = "Scheduled"
    UNSCHEDULABLE = "Unschedulable"
    ERROR = "Error"
    #: Held back by a PreEnqueue plugin (spec.schedulingGates): never tried, as kubectl's "SchedulingGated".
    GATED = "SchedulingGated"


@dataclass
class NodeTrace:
    """One node in one scheduling attempt."""

    #: (plugin, "passed" or the status it returned), in the order the plugins ran.
    filters: list[tuple[str, str]] = field(default_factory=list)
    #: plugin -> (score after NormalizeScore, that times the plugin's weight).
    scores: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: The cycle ended in Error before every Filter plugin had run on this node (the
    #: plugin that failed did so on this node or on one before it): nothing is known.
    unfinished: bool = False

    @property
    def feasible(self) -> bool | None:
        """True: every Filter plugin passed it; False: one rejected it; None: not evaluated."""
        if self.unfinished:
            return None
        return bool(self.filters) and all(result == PASSED for _p, result in self.filters)

    @property
    def rejection(self) -> tuple[str, str] | None:
        """(plugin, reason) of the Filter plugin that rejected the node; None if none did."""
        if self.unfinished or not self.filters or self.filters[-1][1] == PASSED:
            return None
        return self.filters[-1]

    @property
    def total(self) -> int | None:
        return sum(w for _s, w in self.scores.values()) if self.scores else None

    def to_json(self) -> dict[str, Any]:
        return {
            "filter": dict(self.filters),
            # null: not evaluated (the cycle ended in Error before every Filter plugin ran on it).
            "feasible": self.feasible,
            "score": {p: s for p, (s, _w) in self.scores.items()},
            "finalScore": {p: w for p, (_s, w) in self.scores.items()},
            "total": self.total,
        }


@dataclass
class Shortfall:
    """One resource some nodes were short of: the pod's request and the most free on any of
    those nodes, in kube-scheduler's units (millicores for cpu, bytes, or a count)."""

    requested: int
    max_free: int
    #: How many nodes were rejected for it.
    nodes: int = 0


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
    #: Nodes of the cycle's snapshot (0: not known).
    num_nodes: int = 0
    #: kube-scheduler's FitError message when no node fit ("0/N nodes are available: ...").
    fit_error: str = ""
    #: For each "Insufficient <resource>" rejection: what the pod requests and the most any
    #: node rejected so has free.
    shortfalls: dict[str, Shortfall] = field(default_factory=dict)

    def node(self, name: str) -> NodeTrace:
        trace = self.nodes.get(name)
        if trace is None:
            trace = self.nodes[name] = NodeTrace()
        return trace

    def rejections(self) -> list[RejectionGroup]:
        """The rejected nodes grouped by (plugin, reason), the largest group first."""
        groups = reason_groups((name, *rejection) for name, node in sorted(self.nodes.items())
                               if (rejection := node.rejection) is not None)
        return sorted((RejectionGroup(plugin, reason, nodes) for (plugin, reason), nodes in groups.items()),
                      key=lambda g: (-len(g.nodes), g.plugin, g.reason))

    def not_evaluated(self) -> list[str]:
        """Nodes the Filter point had started on when the cycle ended in Error."""
        return sorted(name for name, node in self.nodes.items() if node.unfinished)

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
            "fitError": self.fit_error or None,
            "rejected": [{"plugin": g.plugin, "reason": g.reason, "count": len(g.nodes)} for g in self.rejections()],
            "notEvaluated": self.not_evaluated(),
            "shortfalls": {name: {"requested": s.requested, "maxFree": s.max_free, "nodes": s.nodes}
                           for name, s in self.shortfalls.items()},
        }


@dataclass(frozen=True)
class Unmodelled:
    """Something a pod's result depends on that the simulation does not check."""

    #: A short, stable kind string (``volumes: PersistentVolumeClaim not checked``).
    kind: str
    #: The particulars of this pod, and why: shown by ``--explain``.
    detail: str = ""


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
    #: What of this pod the simulation does not check: its result may differ in a cluster.
    unmodelled: list[Unmodelled] = field(default_factory=list)

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
            "unmodelled": [u.kind for u in self.unmodelled],
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
    #: Per wasm plugin: traps, discarded instances, guest calls per extension point (count, sum
    #: of seconds): `summary.metrics` of the JSON, when the run measured them (`simulate(metrics=True)`).
    metrics: dict[str, Any] | None = None

    def count(self, status: PodStatus) -> int:
        return sum(1 for p in self.pods if p.status == status)

    def summary(self) -> dict[str, Any]:
        return {
            "scheduled": self.count(PodStatus.SCHEDULED),
            "unschedulable": self.count(PodStatus.UNSCHEDULABLE),
            "errors": self.count(PodStatus.ERROR),
            "gated": self.count(PodStatus.GATED),
            "seconds": round(self.seconds, 3),
            **({"metrics": self.metrics} if self.metrics is not None else {}),
        }

    def outcome(self, key: str) -> PodOutcome | None:
        return next((p for p in self.pods if p.key == key), None)

    def to_json(self) -> dict[str, Any]:
        return {"pods": [p.to_json() for p in self.pods], "summary": self.summary()}

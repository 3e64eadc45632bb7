"""InterPodAffinity: required and preferred pod affinity and anti-affinity, as kube-scheduler 1.33.

This module owns kube-scheduler's InterPodAffinity plugin (filtering.go, scoring.go,
plugin.go) and what it needs: label selectors as ``metav1.LabelSelectorAsSelector``
builds them, a pod's affinity terms parsed once (``matchLabelKeys`` and
``mismatchLabelKeys`` merged as the API server does), namespace labels, and the
per-cycle state. PreFilter counts matching pods per topology pair, so Filter reads only
those counts and the node's labels (`AntiAffinityIndex` keeps the existing pods'
required anti-affinity terms across cycles, matched once per distinct term); AddPod and
RemovePod update the counts; PreScore sums the matching terms' weights per topology
pair (`ScoringIndex`), Score adds a node's pairs and NormalizeScore scales them to
0..100. `docs/framework.md` ("InterPodAffinity") has the rules and what a snapshot
without Namespace objects means for ``namespaceSelector``.
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any, Generic, TypeVar

from wasm_scheduler.adapters.framework.cycle_state import CycleState
from wasm_scheduler.adapters.framework.plugins.base import NativePlugin, PluginContext
from wasm_scheduler.adapters.framework.pods import KubeObject, PodInfo
from wasm_scheduler.adapters.framework.snapshot import NodeInfo, SnapshotView, node_labels
from wasm_scheduler.framework_api import (
    MAX_NODE_SCORE,
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
    node_scores,
)

NAME = "InterPodAffinity"
ERR_REASON_EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"
ERR_REASON_AFFINITY = "node(s) didn't match pod affinity rules"
ERR_REASON_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
PRE_FILTER_STATE_KEY = "PreFilter" + NAME
PRE_SCORE_STATE_KEY = "PreScore" + NAME
#: The label the API server gives every namespace (its name).
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
DEFAULT_HARD_POD_AFFINITY_WEIGHT = 1
_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
_PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"

# --- label selectors -------------------------------------------------------------------

_IN, _NOT_IN, _EXISTS, _DOES_NOT_EXIST = range(4)
_OPERATORS = {"In": _IN, "NotIn": _NOT_IN, "Exists": _EXISTS, "DoesNotExist": _DOES_NOT_EXIST}
_LABEL_VALUE_FMT = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?"
_QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = f"{_DNS1123_LABEL_FMT}(\\.{_DNS1123_LABEL_FMT})*"
_LABEL_VALUE = re.compile(_LABEL_VALUE_FMT)
_QUALIFIED_NAME = re.compile(_QUALIFIED_NAME_FMT)
_DNS1123_SUBDOMAIN = re.compile(_DNS1123_SUBDOMAIN_FMT)


def _regex_error(message: str, fmt: str, *examples: str) -> str:
    """k8s.io/apimachinery's validation.RegexError, word for word."""
    shown = " or ".join(f"'{example}', " for example in examples)
    return f"{message} (e.g. {shown}regex used for validation is '{fmt}')"


def _quoted(value: str) -> str:
    """Go's %q of a string (enough of it for label keys and values)."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _label_value_problems(value: str) -> list[str]:
    problems = []
    if len(value) > 63:
        problems.append("must be no more than 63 characters")
    if not _LABEL_VALUE.fullmatch(value):
        problems.append(_regex_error("a valid label must be an empty string or consist of alphanumeric characters, "
                                     "'-', '_' or '.', and must start and end with an alphanumeric character",
                                     _LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return problems


def _label_key_problems(key: str) -> list[str]:
    """validation.IsQualifiedName."""
    name_rule = ("must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
                 "alphanumeric character")
    parts = key.split("/")
    if len(parts) > 2:
        return ["a qualified name " + _regex_error(name_rule, _QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc")
                + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]
    problems = []
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            problems.append("prefix part must be non-empty")
        else:
            if len(prefix) > 253:
                problems.append("prefix part must be no more than 253 characters")
            if not _DNS1123_SUBDOMAIN.fullmatch(prefix):
                problems.append("prefix part " + _regex_error(
                    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
                    "and must start and end with an alphanumeric character", _DNS1123_SUBDOMAIN_FMT, "example.com"))
    name = parts[-1]
    if not name:
        problems.append("name part must be non-empty")
    elif len(name) > 63:
        problems.append("name part must be no more than 63 characters")
    if not _QUALIFIED_NAME.fullmatch(name):
        problems.append("name part " + _regex_error(name_rule, _QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc"))
    return problems


def _go_strings(values: Sequence[str]) -> str:
    """Go's %#v of a []string."""
    return "[]string{" + ", ".join(_quoted(v) for v in values) + "}"


def _aggregate(errors: Sequence[str]) -> str:
    """utilerrors.NewAggregate(...).Error(): one message as is, several in brackets."""
    unique = list(dict.fromkeys(errors))
    return unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"


class SelectorError(ValueError):
    """A label selector metav1.LabelSelectorAsSelector would refuse (the text is its error's)."""


#: A requirement: (label key, operator, values).
Requirement = tuple[str, int, frozenset[str]]


def _requirement(key: str, op: int, values: Sequence[str]) -> Requirement:
    """labels.NewRequirement: the key and the values checked."""
    errors = []
    problems = _label_key_problems(key)
    if problems:
        errors.append(f"key: Invalid value: {_quoted(key)}: {'; '.join(problems)}")
    if op in (_IN, _NOT_IN) and not values:
        errors.append(f"values: Invalid value: {_go_strings(values)}: for 'in', 'notin' operators, values set can't "
                      "be empty")
    if op in (_EXISTS, _DOES_NOT_EXIST) and values:
        errors.append(f"values: Invalid value: {_go_strings(values)}: values set must be empty for exists and does "
                      "not exist")
    for i, value in enumerate(values):
        problems = _label_value_problems(value)
        if problems:
            errors.append(f"values[{i}][{key}]: Invalid value: {_quoted(value)}: {'; '.join(problems)}")
    if errors:
        raise SelectorError(_aggregate(errors))
    return key, op, frozenset(values)


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A parsed metav1.LabelSelector: requirements ANDed; `nothing` (a nil selector)
    matches no labels, no requirement (an empty selector) matches all."""

    requirements: tuple[Requirement, ...] = ()
    nothing: bool = False

    @classmethod
    def parse(cls, raw: Mapping[str, Any] | None) -> LabelSelector:
        """metav1.LabelSelectorAsSelector; SelectorError as it would fail."""
        if raw is None:
            return NOTHING
        if not isinstance(raw, Mapping):
            raise SelectorError(f"expected a label selector mapping, got {type(raw).__name__}")
        match_labels = raw.get("matchLabels") or {}
        expressions = raw.get("matchExpressions") or []
        if not isinstance(match_labels, Mapping) or not isinstance(expressions, list) \
                or not all(isinstance(expr, Mapping) for expr in expressions):
            raise SelectorError("expected matchLabels to be a mapping and matchExpressions a list of mappings")
        requirements = [_requirement(str(key), _IN, [str(value)]) for key, value in match_labels.items()]
        for expr in expressions:
            operator = str(expr.get("operator", ""))
            op = _OPERATORS.get(operator)
            if op is None:
                raise SelectorError(f"{_quoted(operator)} is not a valid label selector operator")
            requirements.append(_requirement(str(expr.get("key", "")), op, [str(v) for v in expr.get("values") or ()]))
        return cls(tuple(requirements)) if requirements else EVERYTHING

    def with_requirements(self, extra: Iterable[Requirement]) -> LabelSelector:
        return LabelSelector((*self.requirements, *extra), self.nothing)

    @property
    def empty(self) -> bool:
        """labels.Selector.Empty(): matches everything."""
        return not self.nothing and not self.requirements

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.nothing:
            return False
        for key, op, values in self.requirements:
            value = labels.get(key)
            if op == _IN:
                if value is None or value not in values:
                    return False
            elif op == _NOT_IN:
                if value is not None and value in values:
                    return False
            elif (value is None) == (op == _EXISTS):
                return False
        return True


NOTHING = LabelSelector(nothing=True)
EVERYTHING = LabelSelector()


# --- namespaces ------------------------------------------------------------------------

class NamespaceLabels:
    """Namespace name -> its labels: given Namespace objects, or (None) every namespace
    with only ``kubernetes.io/metadata.name``, which the API server puts on each."""

    def __init__(self, namespaces: Mapping[str, Mapping[str, str]] | None = None) -> None:
        self._given = namespaces is not None
        self._labels: dict[str, Mapping[str, str]] = {
            name: {NAMESPACE_NAME_LABEL: name, **labels} for name, labels in (namespaces or {}).items()}

    def of(self, namespace: str) -> Mapping[str, str] | None:
        """The namespace's labels; None for a namespace the given objects do not have."""
        labels = self._labels.get(namespace)
        if labels is None and not self._given:
            labels = self._labels[namespace] = {NAMESPACE_NAME_LABEL: namespace}
        return labels


# --- affinity terms --------------------------------------------------------------------

def _namespace(pod: KubeObject) -> str:
    return str((pod.get("metadata") or {}).get("namespace") or "default")


def _labels(pod: KubeObject) -> Mapping[str, str]:
    return (pod.get("metadata") or {}).get("labels") or {}


@dataclass(frozen=True, slots=True)
class AffinityTerm:
    """kube-scheduler's framework.AffinityTerm: a parsed v1.PodAffinityTerm."""

    selector: LabelSelector
    namespaces: frozenset[str]
    namespace_selector: LabelSelector
    topology_key: str

    def matches(self, namespace: str, labels: Mapping[str, str], namespace_labels: Mapping[str, str]) -> bool:
        """AffinityTerm.Matches: the pod (its namespace, labels and namespace's labels)
        is in the term's namespaces and matches its selector (an existing pod's term
        against the incoming pod)."""
        return ((namespace in self.namespaces or self.namespace_selector.matches(namespace_labels))
                and self.selector.matches(labels))

    def matches_listed(self, namespace: str, labels: Mapping[str, str], namespaces: NamespaceLabels) -> bool:
        """As kube-scheduler matches the incoming pod's terms, whose namespaceSelector it
        merges into the namespaces listed (mergeAffinityTermNamespacesIfNotEmpty): a
        namespace it does not know matches only an empty selector."""
        if not self.selector.matches(labels):
            return False
        if namespace in self.namespaces:
            return True
        selector = self.namespace_selector
        if selector.nothing:
            return False
        if selector.empty:
            return True
        namespace_labels = namespaces.of(namespace)
        return namespace_labels is not None and selector.matches(namespace_labels)


@dataclass(frozen=True, slots=True)
class WeightedAffinityTerm:
    term: AffinityTerm
    weight: int


@dataclass(frozen=True, slots=True)
class PodAffinityTerms:
    """A pod's parsed terms (kube's PodInfo fields); `error` names what did not parse
    (kube-scheduler's NewPodInfo error: those terms are left out)."""

    required_affinity: tuple[AffinityTerm, ...] = ()
    required_anti_affinity: tuple[AffinityTerm, ...] = ()
    preferred_affinity: tuple[WeightedAffinityTerm, ...] = ()
    preferred_anti_affinity: tuple[WeightedAffinityTerm, ...] = ()
    error: str = ""

    @property
    def has_required(self) -> bool:
        return bool(self.required_affinity or self.required_anti_affinity)

    @property
    def has_preferred(self) -> bool:
        return bool(self.preferred_affinity or self.preferred_anti_affinity)


NO_TERMS = PodAffinityTerms()


def _label_key_requirements(term: Mapping[str, Any], labels: Mapping[str, str]) -> list[Requirement]:
    """What the API server adds to a term's labelSelector at the pod's creation
    (matchLabelKeys: In, mismatchLabelKeys: NotIn, with the pod's value of each key it has);
    a pod read from a cluster has them already, and adding them again changes nothing."""
    added: list[Requirement] = []
    for field_name, op in (("matchLabelKeys", _IN), ("mismatchLabelKeys", _NOT_IN)):
        for key in term.get(field_name) or ():
            value = labels.get(str(key))
            if value is not None:
                added.append((str(key), op, frozenset((value,))))
    return added


def _affinity_term(raw: Mapping[str, Any], namespace: str, labels: Mapping[str, str]) -> AffinityTerm:
    """framework.newAffinityTerm; SelectorError for a selector that does not parse."""
    if not isinstance(raw, Mapping):
        raise SelectorError(f"expected a pod affinity term mapping, got {type(raw).__name__}")
    label_selector = raw.get("labelSelector")
    selector = LabelSelector.parse(label_selector)
    if label_selector is not None:  # a nil selector stays nil: it matches no pod anyway
        extra = _label_key_requirements(raw, labels)
        if extra:
            selector = selector.with_requirements(extra)
    listed = raw.get("namespaces") or ()
    namespace_selector = raw.get("namespaceSelector")
    namespaces = frozenset(str(n) for n in listed) if listed or namespace_selector is not None \
        else frozenset((namespace,))
    return AffinityTerm(selector, namespaces, LabelSelector.parse(namespace_selector),
                        str(raw.get("topologyKey") or ""))


def parse_pod_affinity(pod: KubeObject) -> PodAffinityTerms:
    """The pod's affinity terms, as kube-scheduler's PodInfo.Update parses them."""
    affinity = (pod.get("spec") or {}).get("affinity") or {}
    pod_affinity = affinity.get("podAffinity") or {}
    pod_anti = affinity.get("podAntiAffinity") or {}
    if not pod_affinity and not pod_anti:
        return NO_TERMS
    namespace, labels = _namespace(pod), _labels(pod)
    errors: list[str] = []

    def terms(raw: Any, what: str) -> tuple[AffinityTerm, ...]:
        try:
            return tuple(_affinity_term(t, namespace, labels) for t in raw or ())
        except (SelectorError, AttributeError, TypeError, ValueError) as exc:  # a malformed term is the pod's
            errors.append(f"{what}: {exc}")
            return ()

    def weighted(raw: Any, what: str) -> tuple[WeightedAffinityTerm, ...]:
        try:
            return tuple(WeightedAffinityTerm(_affinity_term(t.get("podAffinityTerm") or {}, namespace, labels),
                                              int(t.get("weight") or 0)) for t in raw or ())
        except (SelectorError, AttributeError, TypeError, ValueError) as exc:
            errors.append(f"{what}: {exc}")
            return ()

    parsed = PodAffinityTerms(
        terms(pod_affinity.get(_REQUIRED), "requiredAffinityTerms"),
        terms(pod_anti.get(_REQUIRED), "requiredAntiAffinityTerms"),
        weighted(pod_affinity.get(_PREFERRED), "preferredAffinityTerms"),
        weighted(pod_anti.get(_PREFERRED), "preferredAntiAffinityTerms"),
    )
    if errors:
        return PodAffinityTerms(parsed.required_affinity, parsed.required_anti_affinity, parsed.preferred_affinity,
                                parsed.preferred_anti_affinity, _aggregate(errors))
    return parsed


def namespace_selector_keys(pod: KubeObject) -> set[str]:
    """The namespace label keys the pod's affinity terms select on (for the report of
    what the simulation does not model: only ``kubernetes.io/metadata.name`` is known)."""
    affinity = (pod.get("spec") or {}).get("affinity") or {}
    keys: set[str] = set()
    for kind in ("podAffinity", "podAntiAffinity"):
        rules = affinity.get(kind) or {}
        raw_terms = [*(rules.get(_REQUIRED) or ()),
                     *((t.get("podAffinityTerm") or {}) for t in rules.get(_PREFERRED) or () if isinstance(t, Mapping))]
        for term in raw_terms:
            selector = term.get("namespaceSelector") if isinstance(term, Mapping) else None
            if isinstance(selector, Mapping):
                keys.update(str(k) for k in selector.get("matchLabels") or {})
                keys.update(str(e.get("key")) for e in selector.get("matchExpressions") or () if isinstance(e, Mapping))
    return keys


# --- topology counts -------------------------------------------------------------------

#: (topology key, value) -> how many matching terms (kube's topologyToMatchedTermCount).
TopologyCounts = dict[tuple[str, str], int]


def _update(counts: TopologyCounts, node_labels: Mapping[str, str], key: str, value: int) -> None:
    """topologyToMatchedTermCount.update: a pair down to zero is deleted."""
    topology_value = node_labels.get(key)
    if topology_value is not None:
        pair = (key, topology_value)
        total = counts.get(pair, 0) + value
        if total:
            counts[pair] = total
        else:
            counts.pop(pair, None)


def _matches_all_listed(terms: Sequence[AffinityTerm], namespace: str, labels: Mapping[str, str],
                        namespaces: NamespaceLabels) -> bool:
    """podMatchesAllAffinityTerms (the incoming pod's terms: namespaces merged)."""
    return bool(terms) and all(t.matches_listed(namespace, labels, namespaces) for t in terms)


@dataclass(slots=True)
class PreFilterState:
    """What PreFilter leaves for Filter, AddPod and RemovePod (kube's preFilterState)."""

    terms: PodAffinityTerms
    namespace: str
    labels: Mapping[str, str]
    #: The incoming pod's namespace labels ({} for an unknown namespace).
    namespace_labels: Mapping[str, str]
    #: Existing pods' required anti-affinity terms that match the incoming pod.
    existing_anti_affinity_counts: TopologyCounts = field(default_factory=dict)
    #: Existing pods that match all the incoming pod's required affinity terms (once per term).
    affinity_counts: TopologyCounts = field(default_factory=dict)
    #: Existing pods that match the incoming pod's required anti-affinity terms.
    anti_affinity_counts: TopologyCounts = field(default_factory=dict)
    #: The incoming pod matches all its own required affinity terms ("the first of its kind").
    matches_own_affinity: bool = False

    def clone(self) -> PreFilterState:
        return PreFilterState(self.terms, self.namespace, self.labels, self.namespace_labels,
                              dict(self.existing_anti_affinity_counts), dict(self.affinity_counts),
                              dict(self.anti_affinity_counts), self.matches_own_affinity)

    def update_with_pod(self, other: PodAffinityTerms, pod: KubeObject, node: Mapping[str, str], multiplier: int,
                        namespaces: NamespaceLabels) -> None:
        """preFilterState.updateWithPod: `pod` (with `other` terms) added to or removed from a node."""
        for term in other.required_anti_affinity:
            if term.matches(self.namespace, self.labels, self.namespace_labels):
                _update(self.existing_anti_affinity_counts, node, term.topology_key, multiplier)
        namespace, labels = _namespace(pod), _labels(pod)
        required = self.terms.required_affinity
        if _matches_all_listed(required, namespace, labels, namespaces):
            for term in required:
                _update(self.affinity_counts, node, term.topology_key, multiplier)
        for term in self.terms.required_anti_affinity:
            if term.matches_listed(namespace, labels, namespaces):
                _update(self.anti_affinity_counts, node, term.topology_key, multiplier)


#: Topology key -> value -> summed weights (kube's scoreMap).
ScoreMap = dict[str, dict[str, int]]


def _add_score(scores: ScoreMap, node: Mapping[str, str], key: str, weight: int) -> None:
    value = node.get(key)
    if value is not None:
        values = scores.setdefault(key, {})
        values[value] = values.get(value, 0) + weight


# --- existing pods' terms, indexed across cycles -----------------------------------------

_E = TypeVar("_E")
#: An existing pod's required anti-affinity term and the topology pair of its node.
AntiAffinityEntry = tuple[AffinityTerm, tuple[str, str]]
#: An existing pod's term that can score: the term, the topology key and value of its node,
#: and the weight it adds (hardPodAffinityWeight, a preferred weight, or minus one).
ScoringEntry = tuple[AffinityTerm, str, str, int]


class _PerNode(Generic[_E]):
    """What each node of a list contributes (`entries`), found again only for the nodes
    whose NodeInfo changed since the last `sync` (NodeInfos are immutable: a node that
    gained or lost a pod, or changed labels, is a new object)."""

    def __init__(self, entries: Callable[[NodeInfo], tuple[_E, ...]]) -> None:
        self._entries = entries
        self.nodes: dict[str, tuple[NodeInfo, tuple[_E, ...]]] = {}
        #: The list last synced (a SnapshotView's tuple: the same object, nothing to do).
        self._synced: Sequence[NodeInfo] | None = None

    def sync(self, nodes: Sequence[NodeInfo]) -> list[tuple[tuple[_E, ...], int]]:
        """Bring the entries up to `nodes`; the changes: (entries, +1 added or -1 removed)."""
        if nodes is self._synced:
            return []
        changes: list[tuple[tuple[_E, ...], int]] = []
        cached_nodes = self.nodes
        for node in nodes:
            cached = cached_nodes.get(node.name)
            if cached is not None:
                if cached[0] is node:
                    continue
                if cached[1]:
                    changes.append((cached[1], -1))
            entries = self._entries(node)
            cached_nodes[node.name] = (node, entries)
            if entries:
                changes.append((entries, 1))
        if len(cached_nodes) > len(nodes):  # nodes left the list
            names = {node.name for node in nodes}
            for name in [name for name in cached_nodes if name not in names]:
                gone = cached_nodes.pop(name)[1]
                if gone:
                    changes.append((gone, -1))
        self._synced = nodes
        return changes


class AntiAffinityIndex:
    """The existing pods' required anti-affinity terms grouped by distinct term (the
    replicas of an app share one), each with how many pods carry it per topology pair:
    PreFilter matches each distinct term against the incoming pod once, then adds its
    counts (what kube-scheduler's loop over every pod's terms adds up to)."""

    def __init__(self, entries: Callable[[NodeInfo], tuple[AntiAffinityEntry, ...]]) -> None:
        self._nodes = _PerNode(entries)
        self.groups: dict[AffinityTerm, TopologyCounts] = {}

    def sync(self, nodes: Sequence[NodeInfo]) -> None:
        groups = self.groups
        for entries, multiplier in self._nodes.sync(nodes):
            for term, pair in entries:
                counts = groups.get(term)
                if counts is None:
                    counts = groups[term] = {}
                total = counts.get(pair, 0) + multiplier
                if total:
                    counts[pair] = total
                else:
                    del counts[pair]
                    if not counts:
                        del groups[term]


class ScoringIndex:
    """Per node, the existing pods' terms that can add a score (their preferred terms, and
    their required affinity terms with hardPodAffinityWeight; never required
    anti-affinity), and the nodes that have any."""

    def __init__(self, entries: Callable[[NodeInfo], tuple[ScoringEntry, ...]]) -> None:
        self._nodes = _PerNode(entries)
        self.scoring: dict[str, tuple[ScoringEntry, ...]] = {}

    def sync(self, nodes: Sequence[NodeInfo]) -> None:
        if self._nodes.sync(nodes):
            self.scoring = {name: entries for name, (_node, entries) in self._nodes.nodes.items() if entries}


# --- the plugin ------------------------------------------------------------------------

@dataclass(frozen=True)
class InterPodAffinityArgs:
    """kube-scheduler's InterPodAffinityArgs (v1 defaults)."""

    hard_pod_affinity_weight: int = DEFAULT_HARD_POD_AFFINITY_WEIGHT
    ignore_preferred_terms_of_existing_pods: bool = False


def parse_args(ctx: PluginContext | None) -> InterPodAffinityArgs:
    if ctx is None or not ctx.args:
        return InterPodAffinityArgs()
    args = ctx.args
    known = {"hardPodAffinityWeight", "ignorePreferredTermsOfExistingPods", "apiVersion", "kind"}
    unknown = sorted(str(key) for key in args if key not in known)
    if unknown:
        raise ctx.fail(unknown[0], "unknown InterPodAffinity arg; known: hardPodAffinityWeight, "
                       "ignorePreferredTermsOfExistingPods")
    kind = args.get("kind", "InterPodAffinityArgs")
    if kind != "InterPodAffinityArgs":
        raise ctx.fail("kind", f"expected InterPodAffinityArgs, got {kind!r}")
    weight = args.get("hardPodAffinityWeight", DEFAULT_HARD_POD_AFFINITY_WEIGHT)
    if isinstance(weight, bool) or not isinstance(weight, int) or not 0 <= weight <= 100:
        raise ctx.fail("hardPodAffinityWeight", f"not in valid range [0-100], got {weight!r}")
    ignore = args.get("ignorePreferredTermsOfExistingPods", False)
    if not isinstance(ignore, bool):
        raise ctx.fail("ignorePreferredTermsOfExistingPods", f"expected true or false, got {ignore!r}")
    return InterPodAffinityArgs(weight, ignore)


class InterPodAffinity(NativePlugin):
    NAME = NAME

    def __init__(self, ctx: PluginContext | None = None, name: str = "", *,
                 namespaces: Mapping[str, Mapping[str, str]] | None = None) -> None:
        """`namespaces`: Namespace objects' labels by name; None (a snapshot has none): see the module."""
        super().__init__(ctx, name)
        self.args = parse_args(ctx)
        self.namespaces = NamespaceLabels(namespaces)
        #: id(spec.affinity) -> (that mapping, the pod's metadata, its parsed terms): pod dicts
        #: are never edited, so a pod is parsed once (kept mappings keep their ids unique).
        self._parsed: dict[int, tuple[Mapping[str, Any], Mapping[str, Any], PodAffinityTerms]] = {}
        #: The same by the PodInfo of a pod in the snapshot (one lookup in the loops over pods).
        self._by_info: dict[PodInfo, PodAffinityTerms] = {}
        self._affinity_failed = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_AFFINITY, self.name)
        self._anti_affinity_failed = Status(Code.UNSCHEDULABLE, ERR_REASON_ANTI_AFFINITY, self.name)
        self._existing_failed = Status(Code.UNSCHEDULABLE, ERR_REASON_EXISTING_ANTI_AFFINITY, self.name)
        self._skip = Status(Code.SKIP, "", self.name)
        self._skip_pre_filter = PreFilterResult(self._skip)
        #: The existing pods' terms, kept across cycles (a lock: plugins may be called from
        #: several threads).
        self._index_lock = threading.Lock()
        self._anti_index = AntiAffinityIndex(self._anti_affinity_entries)
        self._scoring_index = ScoringIndex(self._scoring_entries)

    def _anti_affinity_entries(self, node: NodeInfo) -> tuple[AntiAffinityEntry, ...]:
        labels = node_labels(node.node)
        entries = []
        for other in node.pods_with_required_anti_affinity:
            for term in self._terms_of_info(other).required_anti_affinity:
                value = labels.get(term.topology_key)
                if value is not None:
                    entries.append((term, (term.topology_key, value)))
        return tuple(entries)

    def _scoring_entries(self, node: NodeInfo) -> tuple[ScoringEntry, ...]:
        labels = node_labels(node.node)
        if not labels:
            return ()
        hard_weight = self.args.hard_pod_affinity_weight
        entries: list[ScoringEntry] = []

        def add(term: AffinityTerm, weight: int) -> None:
            value = labels.get(term.topology_key)
            if value is not None:
                entries.append((term, term.topology_key, value, weight))

        for other in node.pods_with_affinity:
            existing = self._terms_of_info(other)
            if existing is NO_TERMS:
                continue
            if hard_weight > 0:
                for term in existing.required_affinity:
                    add(term, hard_weight)
            for weighted in existing.preferred_affinity:
                add(weighted.term, weighted.weight)
            for weighted in existing.preferred_anti_affinity:
                add(weighted.term, -weighted.weight)
        return tuple(entries)

    def terms_of(self, pod: KubeObject) -> PodAffinityTerms:
        """The pod's parsed affinity terms (parsed once per pod dict)."""
        affinity = (pod.get("spec") or {}).get("affinity")
        if not affinity or (affinity.get("podAffinity") is None and affinity.get("podAntiAffinity") is None):
            return NO_TERMS
        metadata = pod.get("metadata") or {}
        cached = self._parsed.get(id(affinity))
        if cached is not None and cached[0] is affinity and cached[1] is metadata:
            return cached[2]
        terms = parse_pod_affinity(pod)
        self._parsed[id(affinity)] = (affinity, metadata, terms)
        return terms

    def _terms_of_info(self, info: PodInfo) -> PodAffinityTerms:
        terms = self._by_info.get(info)
        if terms is None:
            terms = self._by_info[info] = self.terms_of(info.pod)
        return terms

    def _view(self) -> SnapshotView | None:
        return self.ctx.handle.snapshot.view if self.ctx is not None else None

    def _no_view(self) -> Status:
        return Status(Code.ERROR, f"{self.name} needs the scheduler's snapshot (no framework handle)", self.name)

    # --- PreFilter, Filter -------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: KubeObject) -> PreFilterResult:
        view = self._view()
        if view is None:
            return PreFilterResult(self._no_view())
        terms = self.terms_of(pod)
        with_anti = view.nodes_with_required_anti_affinity()
        if not with_anti and terms is NO_TERMS:  # the common case: nothing to count
            return self._skip_pre_filter
        if terms.error:
            return PreFilterResult(Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, f"parsing pod: {terms.error}",
                                          self.name))
        namespace, labels = _namespace(pod), _labels(pod)
        s = PreFilterState(terms, namespace, labels, self.namespaces.of(namespace) or {})
        existing = s.existing_anti_affinity_counts
        with self._index_lock:  # each distinct term once, with its pods' counts
            index = self._anti_index
            index.sync(with_anti)
            for term, counts in index.groups.items():
                if term.matches(namespace, labels, s.namespace_labels):
                    for pair, count in counts.items():
                        existing[pair] = existing.get(pair, 0) + count
        if not existing and not terms.has_required:
            return self._skip_pre_filter
        if terms.has_required:
            self._count_incoming(s, view.node_infos)
            s.matches_own_affinity = _matches_all_listed(terms.required_affinity, namespace, labels, self.namespaces)
        state.write(PRE_FILTER_STATE_KEY, s)
        return PreFilterResult(SUCCESS)

    def _count_incoming(self, s: PreFilterState, nodes: Sequence[NodeInfo]) -> None:
        """getIncomingAffinityAntiAffinityCounts: every existing pod against the incoming pod's terms."""
        affinity, anti = s.terms.required_affinity, s.terms.required_anti_affinity
        namespaces = self.namespaces
        for node in nodes:
            if not node.pods:
                continue
            labels_of_node = node_labels(node.node)
            for other in node.pods:
                namespace, labels = _namespace(other.pod), _labels(other.pod)
                if affinity and _matches_all_listed(affinity, namespace, labels, namespaces):
                    for term in affinity:
                        _update(s.affinity_counts, labels_of_node, term.topology_key, 1)
                for term in anti:
                    if term.matches_listed(namespace, labels, namespaces):
                        _update(s.anti_affinity_counts, labels_of_node, term.topology_key, 1)

    def filter_nodes(self, state: CycleState, pod: KubeObject, nodes: Sequence[NodeInfo]) -> dict[str, Status]:
        s = state.get(PRE_FILTER_STATE_KEY)
        if not isinstance(s, PreFilterState):
            missing = Status(Code.ERROR, f'error reading "{PRE_FILTER_STATE_KEY}" from cycleState: not found',
                             self.name)
            return dict.fromkeys([node.name for node in nodes], missing)
        affinity = [t.topology_key for t in s.terms.required_affinity]
        anti = [t.topology_key for t in s.terms.required_anti_affinity] if s.anti_affinity_counts else []
        existing = s.existing_anti_affinity_counts
        existing_keys = {key for (key, _value), count in existing.items() if count > 0}
        affinity_counts, anti_counts = s.affinity_counts, s.anti_affinity_counts
        first_of_its_kind = not affinity_counts and s.matches_own_affinity
        results: dict[str, Status] = {}
        for node in nodes:
            labels = node_labels(node.node)
            status = SUCCESS
            if affinity:  # satisfyPodAffinity
                pods_exist = True
                for key in affinity:
                    value = labels.get(key)
                    if value is None:  # every topology label must exist on the node
                        status = self._affinity_failed
                        break
                    if affinity_counts.get((key, value), 0) <= 0:
                        pods_exist = False
                if status is SUCCESS and not pods_exist and not first_of_its_kind:
                    status = self._affinity_failed
            if status is SUCCESS and anti:  # satisfyPodAntiAffinity
                for key in anti:
                    value = labels.get(key)
                    if value is not None and anti_counts.get((key, value), 0) > 0:
                        status = self._anti_affinity_failed
                        break
            if status is SUCCESS and existing_keys:  # satisfyExistingPodsAntiAffinity
                for key in existing_keys:
                    value = labels.get(key)
                    if value is not None and existing.get((key, value), 0) > 0:
                        status = self._existing_failed
                        break
            results[node.name] = status
        return results

    def add_pod(self, state: CycleState, pod: KubeObject, pod_to_add: KubeObject, node_info: NodeInfo) -> Status:
        return self._update_state(state, pod_to_add, node_info, 1)

    def remove_pod(self, state: CycleState, pod: KubeObject, pod_to_remove: KubeObject,
                   node_info: NodeInfo) -> Status:
        return self._update_state(state, pod_to_remove, node_info, -1)

    def _update_state(self, state: CycleState, other: KubeObject, node_info: NodeInfo, multiplier: int) -> Status:
        s = state.get(PRE_FILTER_STATE_KEY)
        if not isinstance(s, PreFilterState):
            return Status(Code.ERROR, f'error reading "{PRE_FILTER_STATE_KEY}" from cycleState: not found', self.name)
        s.update_with_pod(self.terms_of(other), other, node_labels(node_info.node), multiplier, self.namespaces)
        return SUCCESS

    # --- PreScore, Score ---------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: KubeObject, nodes: Sequence[NodeInfo]) -> Status:
        if not nodes:
            return self._skip
        view = self._view()
        if view is None:
            return self._no_view()
        terms = self.terms_of(pod)
        if terms is NO_TERMS and (self.args.ignore_preferred_terms_of_existing_pods
                                  or not view.nodes_with_pod_affinity()):
            return self._skip  # the common case: nothing to score
        if terms.error:
            return Status(Code.ERROR, f"failed to parse pod: {terms.error}", self.name)
        has_constraints = terms.has_preferred
        if self.args.ignore_preferred_terms_of_existing_pods and not has_constraints:
            return self._skip
        namespace, labels = _namespace(pod), _labels(pod)
        namespace_labels = self.namespaces.of(namespace) or {}
        hard_weight = self.args.hard_pod_affinity_weight
        scores: ScoreMap = {}
        if has_constraints:
            for node in view.node_infos:
                labels_of_node = node_labels(node.node)
                if not labels_of_node:
                    continue
                for other in node.pods:
                    self._process_existing_pod(scores, terms, other, labels_of_node, namespace, labels,
                                               namespace_labels, hard_weight)
        else:  # only the existing pods' terms that can score (required anti-affinity never does)
            with self._index_lock:
                index = self._scoring_index
                index.sync(view.nodes_with_pod_affinity())
                matched: dict[int, bool] = {}  # id(term) -> it matches (the entries keep the terms)
                for entries in index.scoring.values():
                    for term, key, value, weight in entries:
                        match = matched.get(id(term))
                        if match is None:
                            match = matched[id(term)] = term.matches(namespace, labels, namespace_labels)
                        if match:
                            by_value = scores.get(key)
                            if by_value is None:
                                by_value = scores[key] = {}
                            by_value[value] = by_value.get(value, 0) + weight
        if not scores:
            return self._skip
        state.write(PRE_SCORE_STATE_KEY, scores)
        return SUCCESS

    def _process_existing_pod(self, scores: ScoreMap, terms: PodAffinityTerms, other_info: PodInfo,
                              node: Mapping[str, str], namespace: str, labels: Mapping[str, str],
                              namespace_labels: Mapping[str, str], hard_weight: int) -> None:
        """processExistingPod: the incoming pod's preferred terms against `other`, and
        `other`'s terms against the incoming pod, into `scores`."""
        if terms.has_preferred:
            other = other_info.pod
            other_namespace, other_labels = _namespace(other), _labels(other)
            for weighted in terms.preferred_affinity:
                if weighted.term.matches_listed(other_namespace, other_labels, self.namespaces):
                    _add_score(scores, node, weighted.term.topology_key, weighted.weight)
            for weighted in terms.preferred_anti_affinity:
                if weighted.term.matches_listed(other_namespace, other_labels, self.namespaces):
                    _add_score(scores, node, weighted.term.topology_key, -weighted.weight)
        existing = self._terms_of_info(other_info)
        if existing is NO_TERMS:
            return
        if hard_weight > 0:
            for term in existing.required_affinity:
                if term.matches(namespace, labels, namespace_labels):
                    _add_score(scores, node, term.topology_key, hard_weight)
        for weighted in existing.preferred_affinity:
            if weighted.term.matches(namespace, labels, namespace_labels):
                _add_score(scores, node, weighted.term.topology_key, weighted.weight)
        for weighted in existing.preferred_anti_affinity:
            if weighted.term.matches(namespace, labels, namespace_labels):
                _add_score(scores, node, weighted.term.topology_key, -weighted.weight)

    def score_nodes(self, state: CycleState, pod: KubeObject, nodes: Sequence[NodeInfo]) -> ScoreResult:
        scores = state.get(PRE_SCORE_STATE_KEY)
        if scores is None:
            return ScoreResult(Status(Code.ERROR, f'error reading "{PRE_SCORE_STATE_KEY}" from cycleState: not found',
                                      self.name))
        topology: ScoreMap = scores
        values = []
        for node in nodes:
            labels = node_labels(node.node)
            total = 0
            for key, by_value in topology.items():
                value = labels.get(key)
                if value is not None:
                    total += by_value.get(value, 0)
            values.append(total)
        return ScoreResult.from_columns(SUCCESS, [node.name for node in nodes], values, copy=False)

    def normalize_score(self, state: CycleState, pod: KubeObject, scores: Sequence[NodeScore]) -> NormalizeScoreResult:
        topology = state.get(PRE_SCORE_STATE_KEY)
        if topology is None:
            return NormalizeScoreResult(Status(Code.ERROR, f'error reading "{PRE_SCORE_STATE_KEY}" from cycleState: '
                                               "not found", self.name))
        if not topology:
            return NormalizeScoreResult(SUCCESS, tuple(scores))
        return NormalizeScoreResult(SUCCESS, normalize_min_max(scores))

    def events_to_register(self) -> tuple[ClusterEvent, ...]:
        return (ClusterEvent(Resource.POD, ActionType.ADD | ActionType.DELETE),
                ClusterEvent(Resource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL))


def normalize_min_max(scores: Sequence[NodeScore]) -> tuple[NodeScore, ...]:
    """InterPodAffinity's NormalizeScore: (score - min) / (max - min) of 100, truncated
    (float64 arithmetic as kube-scheduler's); every node 0 when all scores are equal."""
    names, values = [s[0] for s in scores], [s[1] for s in scores]
    if not values:
        return ()
    low = min(values)
    spread = max(values) - low
    if spread <= 0:
        return node_scores(names, repeat(0))
    return node_scores(names, [math.trunc(float(MAX_NODE_SCORE) * (float(v - low) / float(spread))) for v in values])

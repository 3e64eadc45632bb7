"""Label, field and taint matching shared by the native plugins.

This module owns the small predicates of Kubernetes' API helpers that several plugins
need: does a toleration tolerate a taint, which taint of a node is not tolerated, does
a node match a NodeSelector (terms ORed, expressions and fields ANDed), does it match a
pod's ``spec.nodeSelector``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from wasm_scheduler.adapters.framework.pods import KubeObject
from wasm_scheduler.adapters.framework.snapshot import node_labels, node_name


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """v1.Toleration.ToleratesTaint."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    if key and key != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    if operator == "Equal":
        return (toleration.get("value") or "") == (taint.get("value") or "")
    return False


def pod_tolerations(pod: KubeObject) -> list[Mapping[str, Any]]:
    return list((pod.get("spec") or {}).get("tolerations") or ())


def first_untolerated(taints: Iterable[Mapping[str, Any]], tolerations: Sequence[Mapping[str, Any]],
                      effects: Iterable[str]) -> Mapping[str, Any] | None:
    """The first taint with one of `effects` that no toleration tolerates."""
    wanted = set(effects)
    for taint in taints:
        if taint.get("effect") in wanted and not any(tolerates(t, taint) for t in tolerations):
            return taint
    return None


def _match_requirement(value: str | None, operator: str, values: Sequence[str]) -> bool:
    if operator == "In":
        return value is not None and value in values
    if operator == "NotIn":
        return value is None or value not in values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if operator in ("Gt", "Lt"):
        if value is None or len(values) != 1:
            return False
        try:
            have, want = int(value), int(values[0])
        except ValueError:
            return False
        return have > want if operator == "Gt" else have < want
    return False


def term_matches(term: Mapping[str, Any], node: KubeObject) -> bool:
    """A NodeSelectorTerm: every expression and every field matches (an empty term matches nothing)."""
    expressions = term.get("matchExpressions") or ()
    fields = term.get("matchFields") or ()
    if not expressions and not fields:
        return False
    labels = node_labels(node)
    for expr in expressions:
        key = str(expr.get("key", ""))
        if not _match_requirement(labels.get(key), str(expr.get("operator", "")),
                                  [str(v) for v in expr.get("values") or ()]):
            return False
    for expr in fields:
        if expr.get("key") != "metadata.name":
            return False
        if not _match_requirement(node_name(node), str(expr.get("operator", "")),
                                  [str(v) for v in expr.get("values") or ()]):
            return False
    return True


def node_selector_matches(selector: Mapping[str, Any], node: KubeObject) -> bool:
    """A NodeSelector: any of its terms matches."""
    return any(term_matches(term, node) for term in selector.get("nodeSelectorTerms") or ())


def labels_match(required: Mapping[str, Any], node: KubeObject) -> bool:
    """A pod's spec.nodeSelector: every label equal."""
    labels = node_labels(node)
    return all(labels.get(k) == str(v) for k, v in required.items())

"""The fidelity comparison's rule for pending pods (tests/e2e/fidelity.py), without a cluster."""

from __future__ import annotations

from tests.e2e.fidelity import Verdict, compare, fit_reasons

FIRST = ("0/60 nodes are available: 1 node(s) didn't match pod topology spread constraints, 16 Insufficient "
         "cpu, 2 node(s) were unschedulable. preemption: 0/60 nodes are available: 60 Preemption is not helpful.")
LATER = ("0/60 nodes are available: 17 Insufficient cpu, 2 node(s) were unschedulable. preemption: 0/60 nodes are "
         "available: 17 No preemption victims found for incoming pod.")
SIMULATED = ("0/60 nodes are available: 1 node(s) didn't match pod topology spread constraints (PodTopologySpread), "
             "16 Insufficient cpu (NodeResourcesFit), 2 node(s) were unschedulable (NodeUnschedulable).")


def test_reasons_drop_counts_and_plugins() -> None:
    assert fit_reasons(SIMULATED) == fit_reasons(FIRST) == frozenset({
        "node(s) didn't match pod topology spread constraints", "Insufficient cpu", "node(s) were unschedulable"})


def test_a_pending_pod_agrees_with_any_attempt_of_kube_scheduler() -> None:
    """kube-scheduler retried the pod when the cluster changed; simulate tried it once."""
    retried = Verdict(None, fit_reasons(LATER), LATER, attempts=(fit_reasons(FIRST), fit_reasons(LATER)))
    once = Verdict(None, fit_reasons(LATER), LATER, attempts=(fit_reasons(LATER),))
    simulated = Verdict(None, fit_reasons(SIMULATED), SIMULATED)
    assert compare({"p": retried}, {"p": simulated}).both_unschedulable == ["p"]
    assert len(compare({"p": once}, {"p": simulated}).differ) == 1
    assert len(compare({"p": retried}, {"p": Verdict("node-1", top=frozenset({"node-1"}))}).differ) == 1

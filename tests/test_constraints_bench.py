"""The pod-constraint benchmark runs on a tiny size (its figures are not asserted: see docs/performance.md)."""

from __future__ import annotations

import json

from wasm_scheduler.adapters.benchmarks import constraints


def test_the_workload_has_half_its_pending_pods_constrained():
    objs = constraints.objects(nodes=4, pods=6, group=2)
    pending = [o for o in objs if o["kind"] == "Pod" and not o["spec"].get("nodeName")]
    assert len([o for o in objs if o["kind"] == "Node"]) == 4 and len(pending) == 6
    constrained = [o for o in pending if o["spec"].get("affinity")]
    assert len(constrained) == 3 and all(o["spec"]["topologySpreadConstraints"] for o in constrained)
    assert {o["metadata"]["labels"]["app"] for o in constrained} == {"app-0", "app-1"}


def test_the_benchmark_runs_on_a_tiny_size(capsys):
    assert constraints.main(["--nodes", "12", "--pods", "20", "--output", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    per_pod = doc["per_pod_us"]
    assert set(per_pod) == {"full", "without"}
    for halves in per_pod.values():
        assert halves["plain"]["pods"] == halves["constrained"]["pods"] == 10
        assert halves["plain"]["scheduled"] == 10 and halves["plain"]["mean"] > 0
    assert doc["plain_ratio"]["wall"] > 0 and doc["plain_ratio"]["target"] == 2.0
    assert "plain pods, full / without" in constraints.render(doc)

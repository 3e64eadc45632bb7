"""What `simulate` says it does not check, per pod, and `--explain`'s answer to "why pending" and "why here"."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from rich.console import Console

from tests.framework_support import Journal, cluster, config, node, pod, recorder
from wasm_scheduler.adapters.cli import main
from wasm_scheduler.adapters.framework.results import CycleTrace, PodOutcome, PodStatus, SimulationReport, Unmodelled
from wasm_scheduler.adapters.framework.simulation import (
    DEFAULT_SPREAD_KIND,
    INLINE_VOLUMES_KIND,
    NAMESPACE_LABELS_KIND,
    RESOURCE_CLAIMS_KIND,
    VOLUMES_KIND,
    pod_unmodelled,
    simulate,
)
from wasm_scheduler.adapters.report import explain_document, format_amount, render_explain, render_table
from wasm_scheduler.framework_api import Code, Status
from wasm_scheduler.registry.compiler import GuestCompiler


def printed(render: Any, *args: Any, width: int = 80) -> str:
    buffer = io.StringIO()
    render(*args, Console(file=buffer, width=width, highlight=False))
    return buffer.getvalue()


def write(tmp_path: Path, *objects: dict[str, Any]) -> str:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": list(objects)}))
    return str(path)


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["simulate", "--no-cache", *args])
    out, err = capsys.readouterr()
    return code, out, err


def owned(name: str, owner: str) -> dict[str, Any]:
    p = pod(name)
    p["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": owner,
                                         "controller": True, "uid": "rs-uid"}]
    return p


def team_anti_affinity() -> dict[str, Any]:
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
        "labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname",
        "namespaceSelector": {"matchLabels": {"team": "a"}}}]}}


# --- A: no silent gaps ----------------------------------------------------------------


def test_each_kind_of_gap_is_found_on_its_pod():
    claims = pod("claims", volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
                                    {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {}}}])
    (gap,) = pod_unmodelled(claims)
    assert gap.kind == VOLUMES_KIND == "volumes: PersistentVolumeClaim not checked"
    assert "data (persistentVolumeClaim data), scratch (ephemeral)" in gap.detail
    assert "VolumeBinding, VolumeZone, VolumeRestrictions and NodeVolumeLimits are not implemented" in gap.detail
    disk = pod("disk", volumes=[{"name": "d", "gcePersistentDisk": {"pdName": "x"}}, {"name": "e", "emptyDir": {}}])
    assert [g.kind for g in pod_unmodelled(disk)] == [INLINE_VOLUMES_KIND]
    dra = pod("dra", resourceClaims=[{"name": "gpu", "resourceClaimName": "gpu-claim"}])
    assert [g.kind for g in pod_unmodelled(dra)] == [RESOURCE_CLAIMS_KIND]
    labelled = pod("ns", affinity=team_anti_affinity())
    (gap,) = pod_unmodelled(labelled)
    assert gap.kind == NAMESPACE_LABELS_KIND and "team" in gap.detail
    plain = pod("plain", volumes=[{"name": "cfg", "configMap": {"name": "cfg"}}])
    assert pod_unmodelled(plain) == []
    # Default spreading only counts when the pod's profile has default constraints.
    rs = owned("rs-pod", "web-7d9f")
    assert pod_unmodelled(rs) == []
    (gap,) = pod_unmodelled(rs, default_spread=True)
    assert gap.kind == DEFAULT_SPREAD_KIND and "ReplicaSet default/web-7d9f" in gap.detail


def test_gaps_reach_the_json_the_table_the_explanation_and_the_one_warning(capsys, tmp_path):
    path = write(tmp_path, node("n1"), node("n2"),
                 pod("claims", volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]),
                 pod("plain"), owned("replica", "web-7d9f"), pod("team-anti", affinity=team_anti_affinity()))
    code = main(["--log-format", "json", "simulate", "--no-cache", "--cluster", path, "--output", "json"])
    out, err = capsys.readouterr()
    assert code == 0
    pods = {p["name"]: p for p in json.loads(out)["pods"]}
    assert pods["claims"]["unmodelled"] == ["volumes: PersistentVolumeClaim not checked"]
    assert pods["plain"]["unmodelled"] == []  # an empty list, not a missing key
    assert pods["replica"]["unmodelled"] == [DEFAULT_SPREAD_KIND]  # the default profile spreads by System defaults
    assert pods["team-anti"]["unmodelled"] == [NAMESPACE_LABELS_KIND]
    # The once-per-run warning stays, and counts what the pods say.
    (warning,) = [json.loads(line) for line in err.splitlines() if "pods.constraints_ignored" in line]
    assert warning["pods"] == 3
    assert warning["kinds"] == {VOLUMES_KIND: 1, DEFAULT_SPREAD_KIND: 1, NAMESPACE_LABELS_KIND: 1}

    code, table, _err = cli(capsys, "--cluster", path)
    assert code == 0
    rows = {line.split()[1]: line for line in table.splitlines() if line.startswith("│ default/")}
    assert "!" in rows["default/claims"] and "!" not in rows["default/plain"]
    assert "3 pods depend on what the simulation does not check" in table
    assert f"{VOLUMES_KIND}: default/claims" in table

    code, explained, _err = cli(capsys, "--cluster", path, "--explain", "claims")
    assert code == 0
    assert "Not checked by the simulation" in explained
    assert VOLUMES_KIND in explained and "VolumeBinding" in " ".join(explained.split())
    code, explained, _err = cli(capsys, "--cluster", path, "--explain", "plain")
    assert "Not checked" not in explained


def test_a_profile_without_default_constraints_has_no_default_spread_gap(tmp_path):
    no_defaults = config(plugin_config=[{"name": "PodTopologySpread", "args": {"defaultingType": "List"}}])
    report = simulate(no_defaults, cluster(node("n1"), owned("replica", "gone")), compiler=GuestCompiler())
    (outcome,) = report.pods
    assert outcome.status == PodStatus.SCHEDULED and outcome.unmodelled == []
    report = simulate(config(), cluster(node("n1"), owned("replica", "gone")), compiler=GuestCompiler())
    assert [g.kind for g in report.pods[0].unmodelled] == [DEFAULT_SPREAD_KIND]


# --- B: why pending, why here ---------------------------------------------------------


def test_rejections_are_grouped_by_plugin_and_reason_after_the_fit_error(capsys, tmp_path):
    taint = [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
    nodes = [node(f"small-{i}", cpu="2") for i in range(3)] + [node(f"gpu-{i}", cpu="8", taints=taint)
                                                                 for i in range(17)]
    running = [pod(f"busy-{i}", cpu="500m", node_name=f"small-{i}") for i in range(3)]
    path = write(tmp_path, *nodes, *running, pod("big", cpu="2"))
    code, out, _err = cli(capsys, "--cluster", path, "--explain", "default/big")
    assert code == 0
    assert "Scheduling results" not in out  # the explanation alone
    text = " ".join(out.split())
    assert text.startswith("Explain default/big: Unschedulable")
    # kube-scheduler's FitError message first (its reasons sorted as strings, as kube sorts them).
    assert ("Attempt 1: Unschedulable 0/20 nodes are available: 17 node(s) had untolerated taint {dedicated: gpu} "
            "(TaintToleration), 3 Insufficient cpu (NodeResourcesFit). preemption:") in text
    # One row per (plugin, reason) with its count, the largest group first; not one per node.
    assert out.index("    17  TaintToleration: node(s)") < out.index("     3  NodeResourcesFit: Insufficient cpu")
    assert "NodeResourcesFit: Insufficient cpu: requests 2, at most 1.5 free on any of these nodes" in text
    assert "(small-0, small-1, small-2)" in text and "gpu-16" not in text
    assert sum("TaintToleration:" in line for line in out.splitlines()) == 1

    code, out, _err = cli(capsys, "--cluster", path, "--explain", "default/big", "--output", "json")
    attempt = json.loads(out)["explain"]["attempts"][0]
    assert attempt["fitError"].startswith("0/20 nodes are available: 17 node(s) had untolerated taint")
    assert attempt["rejected"] == [
        {"plugin": "TaintToleration", "reason": "node(s) had untolerated taint {dedicated: gpu}", "count": 17},
        {"plugin": "NodeResourcesFit", "reason": "Insufficient cpu", "count": 3}]
    assert attempt["shortfalls"] == {"cpu": {"requested": 2000, "maxFree": 1500, "nodes": 3}}


def test_why_here_names_the_runner_up_or_the_tie_break(capsys, tmp_path):
    path = write(tmp_path, node("roomy", cpu="16", memory="32Gi"), node("tight", cpu="2"), pod("web"))
    code, out, _err = cli(capsys, "--cluster", path, "--explain", "web")
    assert code == 0
    assert "Why roomy: the highest total" in " ".join(out.split()) and "for tight, the next best" in out
    path = write(tmp_path, node("a"), node("b"), pod("web"))
    code, out, _err = cli(capsys, "--cluster", path, "--explain", "web")
    assert "the seeded tie-break (--seed) chose it" in " ".join(out.split())


def test_nodes_left_when_a_filter_fails_are_not_evaluated_not_feasible():
    error = Status(Code.ERROR, "wasm trap: unreachable")
    registry = {"Trap": recorder(Journal(), {("filter", "p"): {"n01": error}})}
    nodes = [node(f"n{i:02d}") for i in range(36)]
    report = simulate(config("Trap"), cluster(*nodes, pod("p")), compiler=GuestCompiler(), registry=registry,
                      explain=["default/p"])
    outcome = report.outcome("default/p")
    assert outcome is not None and outcome.status == PodStatus.ERROR
    (trace,) = outcome.traces
    attempt = explain_document(outcome)["attempts"][0]
    # Trap is the last Filter plugin: n00, which it passed before failing on n01, passed every
    # plugin (feasible); the 35 others did not get its answer: not evaluated (null, not true).
    nodes = attempt["nodes"]
    assert nodes["n00"]["feasible"] is True
    assert all(nodes[f"n{i:02d}"]["feasible"] is None for i in range(1, 36))
    assert attempt["notEvaluated"] == [f"n{i:02d}" for i in range(1, 36)]
    assert nodes["n01"]["filter"]["Trap"] == "wasm trap: unreachable"
    text = " ".join(printed(render_explain, outcome).split())
    assert "Not evaluated, the cycle ended in Error: 35 nodes (n01, n02" in text
    assert "Feasible, not scored: 1 node: n00" in text and "n02, n03, n04, n05 and 30 more" in text


def test_a_filter_that_fails_before_others_leaves_every_node_it_passed_not_evaluated():
    error = Status(Code.ERROR, "boom")
    registry = {"Trap": recorder(Journal(), {("filter", "p"): {"n1": error}}), "After": recorder(Journal())}
    report = simulate(config("Trap", "After"), cluster(node("n0"), node("n1"), node("n2"), pod("p")),
                      compiler=GuestCompiler(), registry=registry, explain=["default/p"])
    outcome = report.outcome("default/p")
    assert outcome is not None
    assert outcome.traces[0].not_evaluated() == ["n0", "n1", "n2"]  # "After" never ran on n0
    assert "Feasible" not in printed(render_explain, outcome)


def test_a_name_in_two_namespaces_asks_for_namespace_and_name(capsys, tmp_path):
    path = write(tmp_path, node("n1"), pod("web", namespace="team-a"), pod("web", namespace="team-b"))
    code, out, err = cli(capsys, "--cluster", path, "--explain", "web")
    assert code == 2 and out == ""
    (line,) = err.strip().splitlines()
    assert "--explain web" in line and "2 namespaces (team-a, team-b)" in line and "NAMESPACE/NAME" in line
    code, out, _err = cli(capsys, "--cluster", path, "--explain", "team-b/web")
    assert code == 0 and out.startswith("Explain team-b/web: Scheduled")


def test_amounts_read_as_people_write_them():
    assert format_amount("cpu", 2000) == "2" and format_amount("cpu", 1500) == "1.5"
    assert format_amount("cpu", 250) == "0.25"
    assert format_amount("memory", 8 * 2**30) == "8Gi" and format_amount("memory", 1536 * 2**20) == "1.5Gi"
    assert format_amount("memory", 500 * 2**20) == "500Mi" and format_amount("memory", 100) == "100"
    assert format_amount("nvidia.com/gpu", 2) == "2"


def test_the_table_note_names_at_most_a_few_pods_per_kind():
    gap = Unmodelled(VOLUMES_KIND, "volume data")
    pods = [PodOutcome("default", f"p{i}", f"u{i}", PodStatus.SCHEDULED, "n1", unmodelled=[gap]) for i in range(8)]
    text = printed(render_table, SimulationReport(pods, 0.1), width=120)
    assert "8 pods depend on what the simulation does not check" in text
    assert f"{VOLUMES_KIND}: default/p0, default/p1, default/p2, default/p3, default/p4 and 3 more" in text


def test_a_trace_built_by_hand_still_reads_as_before():
    trace = CycleTrace(attempt=1, selected="node-1", outcome="Scheduled on node-1")
    trace.node("node-1").filters.append(("NodeResourcesFit", "passed"))
    trace.node("node-2").filters.append(("TaintToleration", "node(s) had untolerated taint {dedicated: gpu}"))
    outcome = PodOutcome("default", "web", "uid", PodStatus.SCHEDULED, "node-1", attempts=1, traces=[trace])
    text = printed(render_explain, outcome)
    assert "    1  TaintToleration: node(s) had untolerated taint {dedicated: gpu} (node-2)" in text
    assert "Feasible, not scored: 1 node: * node-1" in text
    assert "Why node-1: the only feasible node, taken without scoring" in text

"""`wasm-scheduler simulate` end to end: the embedded default, crafted snapshots, mistakes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from wasm_scheduler.adapters.cli import main

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
STATUSES = {"Scheduled", "Unschedulable", "Error"}


def simulate(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["simulate", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def example_cluster() -> dict:
    return yaml.safe_load((EXAMPLES / "cluster.yaml").read_text())


@pytest.fixture
def default_run(capsys) -> dict:
    code, out, _err = simulate(capsys, "--output", "json")
    assert code == 0
    return json.loads(out)  # exactly one JSON document on stdout


def by_name(doc: dict) -> dict[str, dict]:
    return {f"{p['namespace']}/{p['name']}": p for p in doc["pods"]}


def test_the_default_run_reports_every_pending_pod(default_run, example_cluster):
    pending = [i for i in example_cluster["items"] if i["kind"] == "Pod" and not i["spec"].get("nodeName")]
    assert 45 <= len(pending) <= 55
    assert [p["name"] for p in default_run["pods"]] == [p["metadata"]["name"] for p in pending]
    for p in default_run["pods"]:
        assert set(p) == {"namespace", "name", "uid", "node", "status", "reason", "scores", "unmodelled"}
        assert p["unmodelled"] == []  # the example carries nothing the simulation does not check
        assert p["status"] in STATUSES
        assert (p["node"] is not None) == (p["status"] == "Scheduled")
    summary = default_run["summary"]
    assert set(summary) == {"scheduled", "unschedulable", "errors", "gated", "seconds", "metrics"}
    assert set(summary["metrics"]) == {"NodeNumber"} and summary["metrics"]["NodeNumber"]["traps"] == 0
    assert summary["scheduled"] + summary["unschedulable"] + summary["errors"] + summary["gated"] == len(pending)
    assert summary["errors"] == 0 and summary["scheduled"] >= 40


def test_the_default_run_places_pods_where_their_constraints_say(default_run, example_cluster):
    nodes = {i["metadata"]["name"]: i for i in example_cluster["items"] if i["kind"] == "Node"}
    pods = by_name(default_run)
    for i in range(4):
        zonal = pods[f"default/zonal-{i}"]
        assert zonal["status"] == "Scheduled"
        assert nodes[zonal["node"]]["metadata"]["labels"]["topology.kubernetes.io/zone"] == "zone-b"
    for i in range(3):
        gpu = pods[f"ml/gpu-{i}"]
        assert nodes[gpu["node"]]["metadata"]["labels"]["accelerator"] == "nvidia-t4"
        mem = pods[f"default/mem-{i}"]
        assert nodes[mem["node"]]["metadata"]["labels"]["node.kubernetes.io/instance-type"] in (
            "e2-standard-8", "e2-standard-16")
    assert all(p["node"] != "node-14" for p in default_run["pods"])  # cordoned


def test_the_default_run_explains_what_does_not_fit(default_run):
    pods = by_name(default_run)
    for name in ("default/huge-0", "default/huge-1", "ml/huge-2"):
        assert pods[name]["status"] == "Unschedulable"
        assert "(NodeResourcesFit)" in pods[name]["reason"] and "Insufficient" in pods[name]["reason"]
    assert "(NodeAffinity)" in pods["default/pinned-0"]["reason"]
    assert "preemptionPolicy=Never" in pods["prod/polite-0"]["reason"]


def test_the_default_run_preempts_for_critical_pods(default_run):
    pods = by_name(default_run)
    for i in range(3):
        critical = pods[f"prod/critical-{i}"]
        assert critical["status"] == "Scheduled"
        assert critical["reason"].startswith("preempted batch/filler-")


def test_nodenumber_takes_part_in_the_default_run(default_run):
    pods = by_name(default_run)
    scored = [p for p in pods.values() if "NodeNumber" in p["scores"]]
    assert len(scored) > 20
    # Where NodeNumber gave 100, the node's name ends in the pod's last digit.
    for p in scored:
        if p["scores"]["NodeNumber"] == 100:
            assert p["node"][-1] == p["name"][-1]
    assert sum(p["scores"]["NodeNumber"] == 100 for p in scored) >= 15


def test_the_table(capsys):
    code, out, err = simulate(capsys)
    assert code == 0
    assert "Scheduling results" in out and "default/web-3" in out and "unschedulable" in out
    assert "scheduled," in out and "pending pods) in" in out
    assert re.search(r"\b\d+ pods? preempted: ", out)
    assert "Traceback" not in err


def test_explain_in_the_table(capsys):
    code, out, _err = simulate(capsys, "--explain", "prod/critical-0")
    assert code == 0
    assert "Explain prod/critical-0" in out
    assert "Attempt 1" in out and "Attempt 2" in out
    assert "PostFilter: Success (DefaultPreemption); nominated node" in out
    assert "NodeResourcesFit: Insufficient cpu" in out


def test_explain_in_json(capsys):
    code, out, _err = simulate(capsys, "--output", "json", "--explain", "web-3")
    assert code == 0
    doc = json.loads(out)
    explain = doc["explain"]
    assert explain["pod"] == "default/web-3"
    (attempt,) = explain["attempts"]
    assert attempt["selected"] == by_name(doc)["default/web-3"]["node"]
    cordoned = attempt["nodes"]["node-14"]
    assert cordoned["feasible"] is False and cordoned["filter"]["NodeUnschedulable"] == "node(s) were unschedulable"
    chosen = attempt["nodes"][attempt["selected"]]
    assert chosen["feasible"] and chosen["finalScore"] == by_name(doc)["default/web-3"]["scores"]
    assert chosen["score"]["TaintToleration"] * attempt["weights"]["TaintToleration"] == \
        chosen["finalScore"]["TaintToleration"]


def crafted(tmp_path: Path, *objects: dict) -> Path:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    return path


def node(name: str, cpu: str = "4", **labels: str) -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
            "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "20"}}}


def pod(name: str, cpu: str = "500m", **spec: object) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "team"},
            "spec": {"containers": [{"name": "c", "image": "busybox",
                                     "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}], **spec}}


def test_nodenumber_decides_on_a_crafted_snapshot_where_all_else_is_equal(capsys, tmp_path):
    path = crafted(tmp_path, *(node(f"worker-{i}") for i in range(10)), pod("job-4"), pod("job-8"), pod("job-1"))
    code, out, _err = simulate(capsys, "--cluster", str(path), "--output", "json")
    assert code == 0
    pods = by_name(json.loads(out))
    assert pods["team/job-4"]["node"] == "worker-4"
    assert pods["team/job-8"]["node"] == "worker-8"
    assert pods["team/job-1"]["node"] == "worker-1"


def test_placements_on_a_crafted_snapshot(capsys, tmp_path):
    path = crafted(
        tmp_path,
        node("small-1", cpu="1", disk="hdd"), node("big-2", cpu="8", disk="ssd"), node("big-3", cpu="8", disk="hdd"),
        pod("needs-ssd", nodeSelector={"disk": "ssd"}),
        pod("too-big", cpu="16"),
        pod("fits-small-only", cpu="750m", affinity={"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["small-1"]}]}]}}}),
        pod("spreads-to-the-emptiest"),
    )
    code, out, _err = simulate(capsys, "--cluster", str(path), "--output", "json")
    assert code == 0
    pods = by_name(json.loads(out))
    assert pods["team/needs-ssd"]["node"] == "big-2"
    assert pods["team/too-big"]["status"] == "Unschedulable"
    assert "3 Insufficient cpu (NodeResourcesFit)" in pods["team/too-big"]["reason"]
    assert pods["team/fits-small-only"]["node"] == "small-1"
    assert pods["team/spreads-to-the-emptiest"]["node"] == "big-3"  # least allocated (big-2 has a pod)


def test_a_default_scheduler_configuration_without_wasm(capsys, tmp_path):
    config = tmp_path / "sched.yaml"
    config.write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n")
    path = crafted(tmp_path, node("n1"), pod("p-1"))
    code, out, _err = simulate(capsys, "--config", str(config), "--cluster", str(path), "--output", "json")
    assert code == 0
    (p,) = json.loads(out)["pods"]
    assert p["node"] == "n1" and p["scores"] == {}  # one feasible node: no scoring


@pytest.mark.parametrize(("make", "args", "expected"), [
    (None, ["--config", "{tmp}/missing.yaml"], "{tmp}/missing.yaml: no such scheduler configuration file"),
    (("sched.yaml", "kind: [\n"), ["--config", "{tmp}/sched.yaml"], "{tmp}/sched.yaml: invalid YAML at line"),
    (("sched.yaml", "apiVersion: v1\nkind: Pod\n"), ["--config", "{tmp}/sched.yaml"],
     "{tmp}/sched.yaml: kind: expected KubeSchedulerConfiguration, got 'Pod'"),
    (("sched.yaml", "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
                    "profiles:\n- plugins: {filter: {enabled: [{name: Nope}]}}\n"),
     ["--config", "{tmp}/sched.yaml"],
     "{tmp}/sched.yaml: profiles[0] (default-scheduler): plugins.filter.enabled[0].name: unknown plugin 'Nope'"),
    (("sched.yaml", "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
                    "profiles:\n- plugins: {multiPoint: {enabled: [{name: G}]}}\n"
                    "  pluginConfig: [{name: G, args: {guestURL: nothere.wasm}}]\n"),
     ["--config", "{tmp}/sched.yaml"],
     "{tmp}/sched.yaml: profiles[0] (default-scheduler): pluginConfig[0] (G): args.guestURL: wasm guest"),
    (("cluster.yaml", "kind: Node\nmetadata: {name: n}\nstatus: {allocatable: {memory: 1Zi}}\n"),
     ["--cluster", "{tmp}/cluster.yaml"], "{tmp}/cluster.yaml: Node n: status.allocatable.memory: '1Zi'"),
    (None, ["--cluster", "{tmp}"], "{tmp}: is a directory, not a cluster file"),
    (None, ["--explain", "no-such-pod"], "{examples}/cluster.yaml: --explain no-such-pod: no pending pod of that name"),
])
def test_mistakes_print_one_line_and_exit_2(capsys, tmp_path, make, args, expected):
    if make is not None:
        (tmp_path / make[0]).write_text(make[1])
    code, out, err = simulate(capsys, *(a.format(tmp=tmp_path) for a in args))
    assert code == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: " + expected.format(tmp=tmp_path, examples=EXAMPLES)), lines[0]


def test_a_pod_field_a_guest_could_not_read_is_the_users_mistake(capsys, tmp_path):
    bad = pod("weird")
    bad["spec"]["containers"][0]["ports"] = [{"containerPort": "eighty"}]
    code, _out, err = simulate(capsys, "--cluster", str(crafted(tmp_path, node("n1"), bad)))
    assert code == 2
    assert err.startswith(f"error: {tmp_path}/cluster.yaml: Pod team/weird: spec.containers[0].ports[0].containerPort")


def test_usage_errors_exit_2(capsys):
    assert main(["simulate", "--output", "xml"]) == 2
    assert main([]) == 2
    capsys.readouterr()


def test_json_logs_go_to_stderr_and_stdout_stays_one_document(capsys):
    code = main(["--log-format", "json", "simulate", "--output", "json", "--log-level", "info"])
    out, err = capsys.readouterr()
    assert code == 0
    assert json.loads(out)["summary"]["scheduled"] > 0
    records = [json.loads(line) for line in err.splitlines() if line.strip()]
    events = {r["event"] for r in records}
    assert {"cycle.started", "cycle.finished", "assignment.acquired"} <= events
    finished = [r for r in records if r["event"] == "cycle.finished" and r.get("phase") == "binding"]
    assert finished and all(r["pod"] and r["pod_uid"] and r["outcome"] for r in finished)


def test_trace_reads_a_json_log_back(capsys, tmp_path):
    assert main(["--log-format", "json", "--log-level", "debug", "simulate", "--output", "json"]) == 0
    _out, err = capsys.readouterr()
    log = tmp_path / "run.jsonl"
    log.write_text(err)
    assert main(["trace", str(log), "--pod", "web-3"]) == 0
    out, _err = capsys.readouterr()
    assert "default/web-3" in out and "[NodeNumber]" in out and "prescore" in out


def test_json_carries_the_preemptions_and_the_ignored_pods_the_table_shows(capsys, tmp_path):
    code, out, _err = simulate(capsys, "--output", "json")
    assert code == 0
    doc = json.loads(out)
    critical = {p["victim"]: p for p in doc["preempted"]}
    assert critical and all(v.startswith("batch/filler-") for v in critical)
    assert {p["preemptor"] for p in doc["preempted"]} == {f"prod/critical-{i}" for i in range(3)}
    pods = by_name(doc)
    for victim in critical.values():
        assert pods[victim["preemptor"]]["node"] == victim["node"]
    assert doc["ignored"] == []
    path = crafted(tmp_path, node("n1"), pod("mine"), pod("theirs", schedulerName="other-scheduler"))
    code, out, _err = simulate(capsys, "--cluster", str(path), "--output", "json")
    assert code == 0
    doc = json.loads(out)
    assert doc["ignored"] == ["team/theirs"] and doc["preempted"] == []
    code, table, _err = simulate(capsys, "--cluster", str(path))
    assert code == 0 and "1 pod ignored" in table


def anti_affinity(required: bool = True) -> dict:
    term = {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}
    rule = ({"requiredDuringSchedulingIgnoredDuringExecution": [term]} if required else
            {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "podAffinityTerm": term}]})
    return {"podAntiAffinity": rule}


def test_one_warning_names_the_pod_constraints_the_simulation_ignores(capsys, tmp_path):
    spread = [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
               "labelSelector": {"matchLabels": {"app": "web"}}}]
    with_port = pod("ported")
    with_port["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 8080}]
    team_anti = anti_affinity()
    team_anti["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]["namespaceSelector"] = {
        "matchLabels": {"team": "a"}}
    path = crafted(
        tmp_path, node("n1"), node("n2"),
        pod("anti-0", affinity=anti_affinity()), pod("anti-1", affinity=anti_affinity()),
        pod("anti-soft", affinity=anti_affinity(required=False)),
        pod("spread", topologySpreadConstraints=spread, affinity=anti_affinity()),
        pod("claims", volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]),
        with_port, pod("plain"), pod("team-anti", affinity=team_anti),
    )
    code = main(["--log-format", "json", "simulate", "--cluster", str(path), "--output", "json"])
    out, err = capsys.readouterr()
    assert code == 0
    assert len(json.loads(out)["pods"]) == 8
    warnings = [json.loads(line) for line in err.splitlines() if "pods.constraints_ignored" in line]
    assert len(warnings) == 1, err  # one line for the run, not one per pod
    (warning,) = warnings
    # "ported": NodePorts models hostPort; InterPodAffinity models pod (anti-)affinity, but
    # for a namespaceSelector on namespace labels (the snapshot has no Namespace objects).
    assert warning["level"] == "warning" and warning["pods"] == 2
    assert warning["kinds"] == {
        "pod (anti-)affinity namespaceSelector on namespace labels": 1,
        "volumes: PersistentVolumeClaim not checked": 1,
    }
    assert str(path) == warning["source"]


def test_the_default_run_warns_about_nothing(capsys):
    code, _out, err = simulate(capsys, "--output", "json")
    assert code == 0
    assert "constraints_ignored" not in err


def printed(render, *args, width: int = 80) -> list[str]:
    import io

    from rich.console import Console

    buffer = io.StringIO()
    render(*args, Console(file=buffer, width=width, highlight=False))
    return buffer.getvalue().splitlines()


def header_words(lines: list[str]) -> set[str]:
    return {word for line in lines for word in line.replace("┃", " ").replace("│", " ").split()}


def test_explain_fits_80_columns_without_splitting_a_word():
    from wasm_scheduler.adapters.framework.cluster import load_cluster
    from wasm_scheduler.adapters.framework.config import load_config
    from wasm_scheduler.adapters.framework.simulation import simulate as run
    from wasm_scheduler.adapters.report import render_explain

    report = run(load_config(EXAMPLES / "scheduler-config.yaml"), load_cluster(EXAMPLES / "cluster.yaml"),
                 explain=["default/web-3"])
    outcome = report.outcome("default/web-3")
    assert outcome is not None
    lines = printed(render_explain, outcome)
    assert all(len(line) <= 80 for line in lines)
    words = header_words(lines)
    (trace,) = outcome.traces
    scorers = {p for n in trace.nodes.values() for p in n.scores}
    legend = " ".join("\n".join(lines).split())  # an abbreviated column is named in full below the table
    assert scorers and all(p in words or f": {p}" in legend for p in scorers), "every score plugin is named whole"
    assert "NodeUnschedulable: node(s) were unschedulable" in "\n".join(lines)
    # Rejected nodes are grouped by plugin and reason (node names in parentheses); the
    # best feasible nodes each have a row that shows the whole name.
    text = " ".join(lines)
    rejected = [name for name, n in trace.nodes.items() if n.feasible is False]
    assert rejected and all(name in text for name in rejected)
    best = sorted((n for n in trace.nodes.items() if n[1].feasible), key=lambda i: (-(i[1].total or 0), i[0]))[:10]
    for name, _node in best:
        assert name in words or f"*{name}" in words


def test_explain_abbreviates_score_plugins_that_do_not_fit_and_says_so():
    from wasm_scheduler.adapters.framework.results import CycleTrace, PodOutcome, PodStatus
    from wasm_scheduler.adapters.report import render_explain

    plugins = ["VeryLongScorePluginNameOne", "VeryLongScorePluginNameTwo", "AnotherRatherLongScorePlugin",
               "NodeResourcesBalancedAllocation"]
    trace = CycleTrace(attempt=1, weights={p: 2 for p in plugins}, selected="node-1", outcome="Scheduled")
    for i in range(3):
        n = trace.node(f"node-{i}")
        n.filters.append(("NodeResourcesFit", "passed"))
        n.scores.update({p: (100 - i, 2 * (100 - i)) for p in plugins})
    trace.node("node-9").filters.append(("TaintToleration", "node(s) had untolerated taint {dedicated: gpu}"))
    outcome = PodOutcome("default", "web", "uid", PodStatus.SCHEDULED, "node-1", attempts=1, traces=[trace])
    lines = printed(render_explain, outcome)
    assert all(len(line) <= 80 for line in lines)
    text = "\n".join(lines)
    assert "VLSPNO: VeryLongScorePluginNameOne, VLSPNT: VeryLongScorePluginNameTwo" in " ".join(text.split())
    assert {"VLSPNO", "VLSPNT", "ARLSP", "NRBA"} <= header_words(lines)
    assert "TaintToleration: node(s) had untolerated taint {dedicated: gpu}" in text

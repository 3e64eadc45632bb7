"""Per-plugin score oracle: simulate's weighted scores against kube-scheduler's own log.

Not a test (it needs the artifacts of a `test_simulate_predicts_kube_scheduler` run whose
kube-scheduler logged at --v=10). Usage::

    python -m tests.e2e.score_oracle FOLDER [--show N]

FOLDER holds `snapshot.yaml`, `sim-config.yaml` and `kube-scheduler.log`. kube-scheduler
logs, for each pod it scores, one ``"Plugin scored node for pod"`` line per plugin and node
with the weighted score (NormalizeScore's result times the weight). `simulate` is run on the
snapshot with every pod explained, and made to follow kube-scheduler: each pod is assumed on
the node kube-scheduler bound it to (`SchedulerOptions.choose_host`). A pod's scores are
compared only when simulate scores it on the cluster kube-scheduler scored it on: the pods
placed before it (the running pods plus those kube-scheduler bound in earlier attempts, in
the order of its ``"Attempting to schedule pod"`` lines) are the ones placed in simulate's
snapshot view of that cycle. Every plugin's disagreements are listed, node by node.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from wasm_scheduler.adapters.framework.cluster import load_cluster
from wasm_scheduler.adapters.framework.config import load_config
from wasm_scheduler.adapters.framework.results import PodStatus
from wasm_scheduler.adapters.framework.scheduler import Scheduler, SchedulerOptions

SCORED = re.compile(r'"Plugin scored node for pod" pod="([^"]+)" plugin="([^"]+)" node="([^"]+)" score=(-?\d+)')
ATTEMPT = re.compile(r'"Attempting to schedule pod" pod="([^"]+)"')
BOUND = re.compile(r'"Successfully bound pod to node" pod="([^"]+)" node="([^"]+)"')
FINAL = re.compile(r'"Calculated node\'s final score for pod" pod="([^"]+)" node="([^"]+)" score=(-?\d+)')
#: The name under which the total (plugins plus extenders) is tallied.
TOTAL = "(final score)"


@dataclass
class KubeRun:
    """What kube-scheduler's log says: attempt order, bindings, and the scores per pod."""

    #: Pod keys in the order of their scheduling attempts (repeated if retried).
    attempts: list[str] = field(default_factory=list)
    #: Pod key -> the node it was bound to.
    bound: dict[str, str] = field(default_factory=dict)
    #: Pod key -> plugin -> node -> weighted score, of the pod's last scored attempt.
    scores: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)
    #: Pod key -> node -> final score (every plugin's weighted score plus the extenders').
    totals: dict[str, dict[str, int]] = field(default_factory=dict)


def read_kube_log(path: Path) -> KubeRun:
    run = KubeRun()
    last_attempt: dict[str, int] = {}
    with path.open(encoding="utf-8", errors="replace") as lines:
        for line in lines:
            if '"Plugin scored node for pod"' in line:
                m = SCORED.search(line)
                if m:
                    pod, plugin, node, score = m.groups()
                    if last_attempt.get(pod, -1) != len(run.attempts) - 1 or pod not in run.scores:
                        run.scores[pod] = defaultdict(dict)  # a new attempt's scores replace the last
                        last_attempt[pod] = len(run.attempts) - 1
                    run.scores[pod][plugin][node] = int(score)
            elif '"Calculated node\'s final score for pod"' in line:
                m = FINAL.search(line)
                if m:
                    run.totals.setdefault(m.group(1), {})[m.group(2)] = int(m.group(3))
            elif '"Attempting to schedule pod"' in line:
                m = ATTEMPT.search(line)
                if m:
                    run.attempts.append(m.group(1))
            elif '"Successfully bound pod to node"' in line:
                m = BOUND.search(line)
                if m:
                    run.bound[m.group(1)] = m.group(2)
    return run


@dataclass
class PluginTally:
    pods_agree: int = 0
    pods_differ: int = 0
    nodes_agree: int = 0
    nodes_differ: int = 0
    #: (pod, node, kube-scheduler's score, simulate's score or None: not scored).
    differences: list[tuple[str, str, int, int | None]] = field(default_factory=list)


@dataclass
class OracleResult:
    compared: list[str] = field(default_factory=list)
    #: Pod -> why it was not compared.
    skipped: dict[str, str] = field(default_factory=dict)
    plugins: dict[str, PluginTally] = field(default_factory=lambda: defaultdict(PluginTally))


def compare_scores(folder: Path, extender_plugins: frozenset[str] = frozenset({"NodeNumber"})) -> OracleResult:
    """`extender_plugins`: plugins that kube-scheduler ran as an extender (their scores are
    only in its final score)."""
    kube = read_kube_log(folder / "kube-scheduler.log")
    cluster = load_cluster(folder / "snapshot.yaml")
    config = load_config(folder / "sim-config.yaml")
    # The pods on each node when kube-scheduler attempted each pod: placed[pod] (one attempt each
    # in the runs this was written for; a retried pod is judged at its last attempt).
    expected_before: dict[str, frozenset[tuple[str, str]]] = {}
    placed: set[tuple[str, str]] = set()
    last = {pod: i for i, pod in enumerate(kube.attempts)}
    for i, pod in enumerate(kube.attempts):
        if last[pod] == i:
            expected_before[pod] = frozenset(placed)
            if pod in kube.bound:
                placed.add((pod, kube.bound[pod]))
    seen_before: dict[str, frozenset[tuple[str, str]]] = {}
    scheduler_box: list[Scheduler] = []
    initial: set[tuple[str, str]] = set()

    def choose_host(pod_name: str, names: Sequence[str], totals: Sequence[int]) -> str:
        view = scheduler_box[0].snapshot.view
        seen_before[pod_name] = frozenset((p.key, n.name) for n in view.node_infos for p in n.pods) - initial
        wanted = kube.bound.get(pod_name)
        if wanted is not None and wanted in names:
            return wanted
        best = max(totals)
        return next(n for n, t in zip(names, totals, strict=True) if t == best)

    options = SchedulerOptions(choose_host=choose_host, explain=frozenset(kube.scores))
    with Scheduler(config, cluster, None, None, options) as scheduler:
        scheduler_box.append(scheduler)
        initial.update((p.key, n.name) for n in scheduler.snapshot.view.node_infos for p in n.pods)
        report = scheduler.run()

    result = OracleResult()
    for pod, by_plugin in kube.scores.items():
        outcome = report.outcome(pod)
        if outcome is None or outcome.status != PodStatus.SCHEDULED or not outcome.traces:
            result.skipped[pod] = f"simulate: {outcome.status if outcome else 'no such pod'}"
            continue
        if seen_before.get(pod) != expected_before.get(pod):
            extra = (seen_before.get(pod) or frozenset()) ^ (expected_before.get(pod) or frozenset())
            result.skipped[pod] = f"cluster state differs ({len(extra)} placements)"
            continue
        trace = outcome.traces[-1]
        result.compared.append(pod)
        for plugin, nodes in by_plugin.items():
            tally = result.plugins[plugin]
            before = len(tally.differences)
            for node, score in nodes.items():
                mine = trace.nodes[node].scores.get(plugin) if node in trace.nodes else None
                if mine is not None and mine[1] == score:
                    tally.nodes_agree += 1
                else:
                    tally.nodes_differ += 1
                    tally.differences.append((pod, node, score, mine[1] if mine else None))
            if len(tally.differences) == before:
                tally.pods_agree += 1
            else:
                tally.pods_differ += 1
        # A plugin kube-scheduler logged no score for was skipped (PreScore Skip): it added 0.
        for node, node_trace in trace.nodes.items():
            for plugin, (_raw, weighted) in node_trace.scores.items():
                if plugin in by_plugin or plugin in extender_plugins:
                    continue
                tally = result.plugins[f"{plugin} (skipped by kube-scheduler)"]
                if weighted == 0:
                    tally.nodes_agree += 1
                else:
                    tally.nodes_differ += 1
                    tally.differences.append((pod, node, 0, weighted))
        # The total: kube-scheduler's includes the extender's (its plugin runs in simulate).
        tally = result.plugins[TOTAL]
        before = len(tally.differences)
        for node, score in kube.totals.get(pod, {}).items():
            total = trace.nodes[node].total if node in trace.nodes else None
            if total == score:
                tally.nodes_agree += 1
            else:
                tally.nodes_differ += 1
                tally.differences.append((pod, node, score, total))
        if len(tally.differences) == before:
            tally.pods_agree += 1
        else:
            tally.pods_differ += 1
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("folder", type=Path)
    parser.add_argument("--show", type=int, default=10, help="differences listed per plugin")
    args = parser.parse_args(argv)
    result = compare_scores(args.folder)
    print(f"{len(result.compared)} pods compared; {len(result.skipped)} skipped")
    for why, count in Counter(result.skipped.values()).most_common():
        print(f"  skipped: {count} x {why}")
    failed = False
    for plugin, tally in sorted(result.plugins.items()):
        print(f"{plugin}: pods {tally.pods_agree} agree, {tally.pods_differ} differ; "
              f"nodes {tally.nodes_agree} agree, {tally.nodes_differ} differ")
        for pod, node, theirs, mine in tally.differences[:args.show]:
            print(f"    {pod} {node}: kube-scheduler {theirs}, simulate {mine}")
        failed = failed or bool(tally.differences)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

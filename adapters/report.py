"""How ``wasm-scheduler simulate`` shows its result: a table, JSON, an explanation.

This module owns rendering a `SimulationReport` for people (a rich table with one row
per pending pod and a summary; ``--explain``'s per-node filter and score breakdown,
as kube-scheduler-simulator shows it) and for programs (exactly one JSON document on
stdout), plus the progress bar shown while a large snapshot is being scheduled.
"""

from __future__ import annotations

import json
import time
from typing import Any, TextIO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from adapters.framework.results import CycleTrace, PodOutcome, PodStatus, SimulationReport

_STYLE = {PodStatus.SCHEDULED: "green", PodStatus.UNSCHEDULABLE: "yellow", PodStatus.ERROR: "red"}


def render_table(report: SimulationReport, console: Console) -> None:
    table = Table(title="Scheduling results", title_justify="left", expand=False)
    table.add_column("Pod", no_wrap=True)
    table.add_column("Node", no_wrap=True)
    table.add_column("Score / reason", overflow="fold")
    for pod in report.pods:
        style = _STYLE[pod.status]
        if pod.status == PodStatus.SCHEDULED:
            score = str(pod.total_score) if pod.total_score is not None else "-"
            detail = f"{score}  ({pod.reason})" if pod.reason else score
            table.add_row(pod.key, Text(pod.node or "", style=style), detail)
        else:
            label = "unschedulable" if pod.status == PodStatus.UNSCHEDULABLE else "error"
            table.add_row(pod.key, Text(label, style=style), Text(pod.reason, style="dim" if not pod.reason else ""))
    console.print(table)
    summary = report.summary()
    console.print(
        f"[green]{summary['scheduled']} scheduled[/], [yellow]{summary['unschedulable']} unschedulable[/], "
        f"[red]{summary['errors']} errors[/] ({len(report.pods)} pending pods) in {summary['seconds']:.2f} s",
        highlight=False,
    )
    if report.preemptions:
        console.print(f"{len(report.preemptions)} pod(s) preempted: " + ", ".join(
            f"{p.victim} (for {p.preemptor} on {p.node})" for p in report.preemptions), highlight=False)
    if report.ignored:
        console.print(f"{len(report.ignored)} pod(s) ignored: their schedulerName is not a profile of the "
                      "configuration", highlight=False)


def render_explain(outcome: PodOutcome, console: Console) -> None:
    console.print()
    console.print(f"[bold]Explain {outcome.key}[/]: {outcome.status}"
                  + (f" on {outcome.node}" if outcome.node else "")
                  + f" after {outcome.attempts} attempt(s)", highlight=False)
    for trace in outcome.traces:
        _render_trace(trace, console)


def _render_trace(trace: CycleTrace, console: Console) -> None:
    console.print()
    console.print(f"[bold]Attempt {trace.attempt}[/]: {trace.outcome}", highlight=False)
    if trace.pre_filter:
        console.print("  PreFilter: " + ", ".join(f"{p} {r}" for p, r in trace.pre_filter), highlight=False)
    if trace.node_subset is not None:
        console.print(f"  PreFilter narrowed the nodes to: {', '.join(trace.node_subset)}", highlight=False)
    if trace.nominated_node:
        console.print(f"  Nominated node {trace.nominated_node} was tried first", highlight=False)
    if trace.pre_score:
        console.print("  PreScore: " + ", ".join(f"{p} {r}" for p, r in trace.pre_score), highlight=False)
    filters = list(dict.fromkeys(p for node in trace.nodes.values() for p, _r in node.filters))
    scorers = list(dict.fromkeys(p for node in trace.nodes.values() for p in node.scores))
    if filters:
        console.print(f"  Filter plugins, in order: {', '.join(filters)}", highlight=False)
    if trace.nodes:
        table = Table(expand=False)
        table.add_column("Node", no_wrap=True)
        table.add_column("Filter", overflow="fold")
        for plugin in scorers:
            table.add_column(f"{plugin}\nx{trace.weights.get(plugin, 1)}", justify="right", overflow="fold")
        table.add_column("Total", justify="right")

        def order(item: tuple[str, Any]) -> tuple[int, int, str]:
            name, node = item
            return (0 if node.feasible else 1, -(node.total or 0), name)

        for name, node in sorted(trace.nodes.items(), key=order):
            selected = name == trace.selected
            cells: list[str | Text] = [Text(("* " if selected else "  ") + name,
                                            style="bold green" if selected else "")]
            if node.feasible:
                cells.append(Text("passed", style="green"))
            else:
                plugin, reason = node.filters[-1] if node.filters else ("", "not evaluated")
                cells.append(Text(f"{plugin}: {reason}", style="yellow"))
            for plugin in scorers:
                score = node.scores.get(plugin)
                cells.append(f"{score[0]} -> {score[1]}" if score else "")
            cells.append(str(node.total) if node.total is not None else "")
            table.add_row(*cells)
        console.print(table)
        console.print("  Filter: passed every filter plugin, or the first plugin that rejected the node and why. "
                      "Score: normalized -> times the weight. *: the selected node.", style="dim", highlight=False)
    if trace.post_filter:
        console.print(f"  PostFilter: {trace.post_filter}", highlight=False)


def json_document(report: SimulationReport, explain: PodOutcome | None = None) -> dict[str, Any]:
    doc = report.to_json()
    if explain is not None:
        doc["explain"] = {"pod": explain.key, "attempts": [t.to_json() for t in explain.traces]}
    return doc


def write_json(doc: dict[str, Any], out: TextIO) -> None:
    out.write(json.dumps(doc, indent=2) + "\n")


class ProgressBar:
    """A progress bar that appears only once scheduling has taken more than `delay` seconds."""

    def __init__(self, console: Console, delay: float = 0.5) -> None:
        self.console = console
        self.delay = delay
        self.started = time.monotonic()
        self._progress: Progress | None = None
        self._task: Any = None

    def __call__(self, done: int, total: int) -> None:
        if self._progress is None:
            if not self.console.is_terminal or time.monotonic() - self.started < self.delay or done >= total:
                return
            self._progress = Progress(TextColumn("scheduling"), BarColumn(), MofNCompleteColumn(),
                                      TimeElapsedColumn(), console=self.console, transient=True)
            self._progress.start()
            self._task = self._progress.add_task("pods", total=total)
        self._progress.update(self._task, completed=done, total=total)

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

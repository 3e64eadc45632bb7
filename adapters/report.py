"""How ``wasm-scheduler simulate`` shows its result: a table, JSON, an explanation.

This module owns rendering a `SimulationReport` for people (a rich table with one row
per pending pod and a summary; ``--explain``'s per-node filter and score breakdown,
as kube-scheduler-simulator shows it, laid out to stay readable in 80 columns) and for
programs (exactly one JSON document on stdout, carrying everything the table shows),
plus the progress bar shown while a large snapshot is being scheduled.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any, TextIO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from wasm_scheduler.adapters.framework.results import CycleTrace, NodeTrace, PodOutcome, PodStatus, SimulationReport

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
    feasible = sorted((item for item in trace.nodes.items() if item[1].feasible),
                      key=lambda item: (-(item[1].total or 0), item[0]))
    rejected = sorted(item for item in trace.nodes.items() if not item[1].feasible)
    if feasible and not scorers:
        console.print("  Feasible nodes, not scored: " + ", ".join(
            ("* " if name == trace.selected else "") + name for name, _node in feasible)
            + (" (*: the selected node)" if trace.selected else ""), highlight=False)
    elif feasible:
        table, legend = _score_table(trace, feasible, scorers, console)
        console.print("  Feasible nodes, best first:", highlight=False)
        console.print(table)
        if legend:
            console.print("  " + legend, style="dim", highlight=False)
        console.print("  Score: normalized -> times the weight (xN). *: the selected node.", style="dim",
                      highlight=False)
    if rejected:
        console.print("  Filtered out: the first plugin that rejected the node, and why:", highlight=False)
        table = Table(expand=False)
        table.add_column("Node", no_wrap=True)
        table.add_column("Rejected by", overflow="fold")
        for name, node in rejected:
            plugin, reason = node.filters[-1] if node.filters else ("", "not evaluated")
            table.add_row(name, Text(f"{plugin}: {reason}" if plugin else reason, style="yellow"))
        console.print(table)
    if trace.post_filter:
        console.print(f"  PostFilter: {trace.post_filter}", highlight=False)


def abbreviation(name: str) -> str:
    """The initials of a CamelCase plugin name: NodeResourcesFit -> NRF."""
    return "".join(word[0].upper() for word in re.findall(r"[A-Z][a-z0-9]*|[a-z0-9]+", name)) or name[:3]


def _score_table(trace: CycleTrace, feasible: list[tuple[str, NodeTrace]], scorers: list[str],
                 console: Console) -> tuple[Table, str]:
    """The feasible nodes' scores, best first; plugin names shortened (and a legend) when they do not fit."""
    table = _build_score_table(trace, feasible, scorers, {p: p for p in scorers})
    natural = console.measure(table, options=console.options.update_width(10_000)).maximum
    if natural <= console.width:
        return table, ""
    short: dict[str, str] = {}
    for plugin in scorers:
        label = base = abbreviation(plugin)
        n = 2
        while label in short.values():
            label, n = f"{base}{n}", n + 1
        short[plugin] = label
    legend = ", ".join(f"{label}: {plugin}" for plugin, label in short.items())
    return _build_score_table(trace, feasible, scorers, short), legend


def _build_score_table(trace: CycleTrace, feasible: list[tuple[str, NodeTrace]], scorers: list[str],
                       labels: dict[str, str]) -> Table:
    table = Table(expand=False)
    table.add_column("Node", no_wrap=True)
    for plugin in scorers:
        table.add_column(f"{labels[plugin]}\nx{trace.weights.get(plugin, 1)}", justify="right", no_wrap=True)
    table.add_column("Total", justify="right", no_wrap=True)
    for name, node in feasible:
        selected = name == trace.selected
        cells: list[str | Text] = [Text(("* " if selected else "  ") + name, style="bold green" if selected else "")]
        for plugin in scorers:
            score = node.scores.get(plugin)
            cells.append(f"{score[0]} -> {score[1]}" if score else "")
        cells.append(str(node.total) if node.total is not None else "")
        table.add_row(*cells)
    return table


def json_document(report: SimulationReport, explain: PodOutcome | None = None) -> dict[str, Any]:
    """The report as one JSON-ready document: what the table shows, preemptions and ignored pods included."""
    doc = report.to_json()
    doc["preempted"] = [{"victim": p.victim, "preemptor": p.preemptor, "node": p.node} for p in report.preemptions]
    doc["ignored"] = list(report.ignored)
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

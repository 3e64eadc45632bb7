"""How ``wasm-scheduler simulate`` shows its result: a table, JSON, an explanation.

This module owns rendering a `SimulationReport` for people (a rich table with one row
per pending pod, a mark on pods whose result depends on what the simulation does not
check, and a summary; ``--explain``'s answer to "why pending" and "why here": the
FitError message, the rejected nodes grouped by plugin and reason with what the pod
asks and what the nodes have free, the nodes not evaluated, and the best feasible
nodes' scores per plugin, laid out to stay readable in 80 columns) and for programs
(exactly one JSON document on stdout, carrying everything the table shows), plus the
progress bar shown while a large snapshot is being scheduled.

See `docs/framework.md` ("`--explain`").
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

from wasm_scheduler.adapters.framework.resources import CPU, EPHEMERAL_STORAGE, MEMORY
from wasm_scheduler.adapters.framework.results import (
    CycleTrace,
    NodeTrace,
    PodOutcome,
    PodStatus,
    RejectionGroup,
    Shortfall,
    SimulationReport,
)

_STYLE = {PodStatus.SCHEDULED: "green", PodStatus.UNSCHEDULABLE: "yellow", PodStatus.ERROR: "red",
          PodStatus.GATED: "cyan"}
_LABEL = {PodStatus.UNSCHEDULABLE: "unschedulable", PodStatus.ERROR: "error", PodStatus.GATED: "gated"}
#: Marks, in the table, a pod whose result depends on what the simulation does not check.
UNMODELLED_MARK = "!"
#: Names shown in one line before "and N more".
NAMES_SHOWN = 5
#: Feasible nodes whose scores --explain shows (the best; the JSON output has them all).
SCORED_NODES_SHOWN = 10


def counted(count: int, noun: str) -> str:
    """``1 pending pod``, ``2 pending pods``, ``0 errors``."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def render_table(report: SimulationReport, console: Console) -> None:
    table = Table(title="Scheduling results", title_justify="left", expand=False)
    table.add_column("Pod", no_wrap=True)
    table.add_column("Node", no_wrap=True)
    table.add_column("Score / reason", overflow="fold")
    for pod in report.pods:
        style = _STYLE[pod.status]
        key = Text(pod.key)
        if pod.unmodelled:
            key.append(f" {UNMODELLED_MARK}", style="bold magenta")
        if pod.status == PodStatus.SCHEDULED:
            score = str(pod.total_score) if pod.total_score is not None else "-"
            detail = f"{score}  ({pod.reason})" if pod.reason else score
            table.add_row(key, Text(pod.node or "", style=style), detail)
        else:
            label = _LABEL[pod.status]
            table.add_row(key, Text(label, style=style), Text(pod.reason, style="dim" if not pod.reason else ""))
    console.print(table)
    summary = report.summary()
    console.print(
        f"[green]{summary['scheduled']} scheduled[/], [yellow]{summary['unschedulable']} unschedulable[/], "
        f"[red]{counted(summary['errors'], 'error')}[/]"
        + (f", [cyan]{summary['gated']} gated[/]" if summary["gated"] else "")
        + f" ({counted(len(report.pods), 'pending pod')}) in {summary['seconds']:.2f} s",
        highlight=False,
    )
    if report.preemptions:
        console.print(f"{counted(len(report.preemptions), 'pod')} preempted: " + ", ".join(
            f"{p.victim} (for {p.preemptor} on {p.node})" for p in report.preemptions), highlight=False)
    if report.ignored:
        console.print(f"{counted(len(report.ignored), 'pod')} ignored: their schedulerName is not a profile of the "
                      "configuration", highlight=False)
    render_unmodelled_note(report, console)


def names_shown(names: list[str], limit: int = NAMES_SHOWN) -> str:
    """``a, b, c`` or ``a, b, c, d, e and 7 more``."""
    if len(names) <= limit:
        return ", ".join(names)
    return f"{', '.join(names[:limit])} and {len(names) - limit} more"


def render_unmodelled_note(report: SimulationReport, console: Console) -> None:
    """Below the table: each kind of what is not checked, and the pods (marked in the table) it concerns."""
    kinds: dict[str, list[str]] = {}
    for pod in report.pods:
        for gap in pod.unmodelled:
            kinds.setdefault(gap.kind, []).append(pod.key)
    if not kinds:
        return
    marked = sum(1 for pod in report.pods if pod.unmodelled)
    _say(console, f"{counted(marked, 'pod')} {'depends' if marked == 1 else 'depend'} on what the simulation "
         "does not check; in a cluster the result may differ (--explain POD says what):",
         first=Text.assemble((UNMODELLED_MARK, "bold magenta"), " "))
    for kind, pods in kinds.items():
        _say(console, f"{kind}: {names_shown(pods)}", indent=4, first="  ")


def _say(console: Console, text: str | Text, indent: int = 2, style: str = "", first: str | Text = "") -> None:
    """One line of --explain, indented; a line that wraps keeps the indent (at word boundaries).
    `first`, if given, starts the first line instead of the indent (a hanging indent)."""
    body = Text(text, style=style) if isinstance(text, str) else text
    for i, line in enumerate(body.wrap(console, max(console.width - indent, 20))):
        line.rstrip()
        start = first if first and i == 0 else " " * indent
        console.print((start.copy() if isinstance(start, Text) else Text(start)) + line, highlight=False,
                      soft_wrap=True)


def render_explain(outcome: PodOutcome, console: Console) -> None:
    """Why the pod is where it is (or pending): what is not checked, then each attempt."""
    console.print(f"[bold]Explain {outcome.key}[/]: {outcome.status}"
                  + (f" on {outcome.node}" if outcome.node else "")
                  + f" after {outcome.attempts} attempt(s)", highlight=False)
    if outcome.unmodelled:
        console.print(Text.assemble((f"{UNMODELLED_MARK} Not checked by the simulation", "bold magenta"),
                                    ": in a cluster the result may differ:"), highlight=False)
        for gap in outcome.unmodelled:
            _say(console, gap.kind + (f": {gap.detail}" if gap.detail else ""))
    if outcome.status != PodStatus.SCHEDULED and outcome.reason and not outcome.traces:
        _say(console, outcome.reason)
    for trace in outcome.traces:
        _render_trace(trace, console)


def format_amount(resource: str, amount: int) -> str:
    """A resource amount as people write it: cpu in cores (1.5), bytes in binary units (512Mi)."""
    if resource == CPU:
        return str(amount // 1000) if amount % 1000 == 0 else f"{amount / 1000:g}"
    if resource in (MEMORY, EPHEMERAL_STORAGE) or resource.startswith("hugepages-"):
        for unit, scale in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if amount >= scale:
                return f"{amount / scale:.2f}".rstrip("0").rstrip(".") + unit
    return str(amount)


def _shortfall_text(group: RejectionGroup, shortfalls: dict[str, Shortfall]) -> str:
    """", requests 2, at most 1.5 free on any of these nodes" for an Insufficient-X group."""
    if not group.reason.startswith("Insufficient "):
        return ""
    resource = group.reason.removeprefix("Insufficient ")
    found = shortfalls.get(resource)
    if found is None:
        return ""
    return (f": requests {format_amount(resource, found.requested)}, at most "
            f"{format_amount(resource, found.max_free)} free on any of these nodes")


def _status_word(trace: CycleTrace) -> str:
    """The attempt's outcome without the FitError message it carries (shown on its own line)."""
    if trace.fit_error and trace.fit_error in trace.outcome:
        return trace.outcome.split(":", 1)[0]
    return trace.outcome


def _render_trace(trace: CycleTrace, console: Console) -> None:
    console.print()
    console.print(f"[bold]Attempt {trace.attempt}[/]: {_status_word(trace)}", highlight=False)
    if trace.fit_error:
        _say(console, trace.fit_error)
    if trace.pre_filter:
        _say(console, "PreFilter: " + ", ".join(f"{p} {r}" for p, r in trace.pre_filter))
    if trace.node_subset is not None:
        _say(console, f"PreFilter narrowed the nodes to {counted(len(trace.node_subset), 'node')}: "
             f"{names_shown(trace.node_subset)}")
    if trace.nominated_node:
        _say(console, f"Nominated node {trace.nominated_node} was tried first")
    filters = list(dict.fromkeys(p for node in trace.nodes.values() for p, _r in node.filters))
    if filters:
        _say(console, f"Filter plugins, in order: {', '.join(filters)}")
    _render_rejections(trace, console)
    _render_not_evaluated(trace, console)
    if trace.pre_score:
        _say(console, "PreScore: " + ", ".join(f"{p} {r}" for p, r in trace.pre_score))
    _render_feasible(trace, console)
    if trace.post_filter:
        _say(console, f"PostFilter: {trace.post_filter}")


def _render_rejections(trace: CycleTrace, console: Console) -> None:
    """One row per (plugin, reason) with its count: the first plugin that rejected each node."""
    groups = trace.rejections()
    outside = 0
    if trace.node_subset is not None and trace.num_nodes:
        outside = trace.num_nodes - len(trace.node_subset)
    if not groups and not outside:
        return
    _say(console, "Filtered out (nodes, the first plugin that rejected them: why):")
    width = len(str(max([len(g.nodes) for g in groups] + [outside])))
    for group in groups:
        line = Text(f"{group.plugin}: {group.reason}" if group.plugin else group.reason, style="yellow")
        line.append(_shortfall_text(group, trace.shortfalls))
        line.append(f" ({names_shown(group.nodes, 3)})", style="dim")
        _say(console, line, indent=width + 6, first=f"    {len(group.nodes):>{width}}  ")
    if outside:
        _say(console, Text("outside the nodes PreFilter narrowed the search to", style="yellow"), indent=width + 6,
             first=f"    {outside:>{width}}  ")


def _render_not_evaluated(trace: CycleTrace, console: Console) -> None:
    """Nodes the cycle did not get to, and why: never called feasible."""
    unfinished = trace.not_evaluated()
    if unfinished:
        _say(console, f"Not evaluated, the cycle ended in Error: {counted(len(unfinished), 'node')} "
             f"({names_shown(unfinished)})")
    searched = len(trace.node_subset) if trace.node_subset is not None else trace.num_nodes
    untried = searched - len(trace.nodes)
    if untried <= 0 or not trace.nodes:
        return
    if unfinished or trace.outcome.startswith(str(PodStatus.ERROR)):
        why = "the cycle ended in Error first"
    elif trace.nominated_node and len(trace.nodes) == 1:
        why = "the nominated node fit"
    else:
        why = "the search stops once it has found enough feasible nodes (percentageOfNodesToScore)"
    _say(console, f"Not filtered: {counted(untried, 'other node')}: {why}")


def _render_feasible(trace: CycleTrace, console: Console) -> None:
    """The feasible nodes, best first, and why the selected one won."""
    scorers = list(dict.fromkeys(p for node in trace.nodes.values() for p in node.scores))
    feasible = sorted((item for item in trace.nodes.items() if item[1].feasible),
                      key=lambda item: (-(item[1].total or 0), item[0]))
    if not feasible:
        return
    if not scorers:
        names = [("* " if name == trace.selected else "") + name for name, _node in feasible]
        _say(console, f"Feasible, not scored: {counted(len(feasible), 'node')}: {names_shown(names, 10)}"
             + (" (*: the selected node)" if trace.selected else ""))
        if trace.selected and len(feasible) == 1:
            _say(console, f"Why {trace.selected}: the only feasible node, taken without scoring")
        return
    shown = feasible[:SCORED_NODES_SHOWN]
    if trace.selected and all(name != trace.selected for name, _node in shown):
        shown += [item for item in feasible if item[0] == trace.selected]
    table, legend = _score_table(trace, shown, scorers, console)
    more = len(feasible) - len(shown)
    _say(console, f"Feasible: {counted(len(feasible), 'node')}"
         + (f", the best {len(shown)} shown (--output json lists them all)" if more else "")
         + ", best first:")
    console.print(table)
    if legend:
        _say(console, legend, style="dim")
    _say(console, "Score: normalized -> times the weight (xN). *: the selected node.", style="dim")
    why = _why_selected(trace, feasible)
    if why:
        _say(console, why)


def _why_selected(trace: CycleTrace, feasible: list[tuple[str, NodeTrace]]) -> str:
    """Why the selected node: the highest total, by how much, or the tie-break among equals."""
    chosen = trace.nodes.get(trace.selected)
    if chosen is None or chosen.total is None:
        return ""
    tied = [name for name, node in feasible if node.total == chosen.total and name != trace.selected]
    if tied:
        return (f"Why {trace.selected}: it shares the highest total, {chosen.total}, with "
                f"{names_shown(tied, 3)}; the seeded tie-break (--seed) chose it")
    runner = next(((name, node) for name, node in feasible if name != trace.selected), None)
    if runner is None:
        return f"Why {trace.selected}: the highest total, {chosen.total}"
    name, node = runner
    ahead = [f"{p} {chosen.scores[p][1] - node.scores[p][1]:+d}" for p in chosen.scores
             if p in node.scores and chosen.scores[p][1] != node.scores[p][1]]
    return (f"Why {trace.selected}: the highest total, {chosen.total}, against {node.total} for {name}, "
            f"the next best" + (f" ({', '.join(ahead)})" if ahead else ""))


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
        doc["explain"] = explain_document(explain)
    return doc


def explain_document(outcome: PodOutcome) -> dict[str, Any]:
    """--explain for programs: the pod's outcome, what is not checked (with why) and each attempt."""
    return {"pod": outcome.key, "status": str(outcome.status), "node": outcome.node, "reason": outcome.reason,
            "unmodelled": [{"kind": gap.kind, "detail": gap.detail} for gap in outcome.unmodelled],
            "attempts": [t.to_json() for t in outcome.traces]}


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

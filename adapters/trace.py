"""`wasm-scheduler trace`: a pod's cycle, rebuilt from a JSON log alone.

This module owns reading the runtime's JSON log (one object a line, as
`--log-format json` writes it) and turning it into per-pod timelines: which instance
of which wasm plugin served which extension points, reassignments, the move to the
binding map, the release, discards, and the framework's outcome. It flags a pod whose
calls within one cycle reached more than one instance, and a cycle whose instance was
never given back. It relies only on the documented event vocabulary
(docs/logging.md), so it works on any log the runtime wrote.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class PluginCycle:
    """One pod's cycle on one wasm plugin: from its assignment to its release."""

    plugin: str
    instance: str
    start: str
    calls: list[tuple[str, str, str]] = field(default_factory=list)  # (extension point, instance, phase)
    events: list[str] = field(default_factory=list)
    #: How the assignment ended: released (postbind/unreserve), reassigned, discarded, or "" (open).
    ended: str = ""

    @property
    def instances(self) -> set[str]:
        return {self.instance} | {instance for _point, instance, _phase in self.calls if instance}


@dataclass
class PodTrace:
    pod: str
    pod_uid: str
    cycles: list[PluginCycle] = field(default_factory=list)
    outcomes: list[str] = field(default_factory=list)
    guest_lines: list[str] = field(default_factory=list)

    @property
    def problems(self) -> list[str]:
        found = []
        for cycle in self.cycles:
            if len(cycle.instances) > 1:
                found.append(f"{cycle.plugin}: one cycle served by {len(cycle.instances)} instances "
                             f"({', '.join(sorted(cycle.instances))})")
        return found


@dataclass
class Trace:
    pods: dict[str, PodTrace] = field(default_factory=dict)
    #: Lines that were JSON objects (log records), and lines that were not.
    json_lines: int = 0
    skipped_lines: int = 0
    #: Cycles still holding an instance at the end of the log (uid, plugin, instance, where).
    open_cycles: list[tuple[str, str, str, str]] = field(default_factory=list)

    @property
    def problems(self) -> dict[str, list[str]]:
        return {uid: p.problems for uid, p in self.pods.items() if p.problems}


def read_trace(lines: Iterable[str]) -> Trace:
    """Rebuild every pod's timeline from log lines; lines that are not JSON are counted, not fatal."""
    trace = Trace()
    # (plugin, instance) -> the cycle it serves now
    serving: dict[tuple[str, str], PluginCycle] = {}
    cycle_of: dict[tuple[str, str], PluginCycle] = {}  # (plugin, pod uid) -> current cycle

    def pod_trace(record: dict[str, Any], uid_key: str = "pod_uid", name_key: str = "pod") -> PodTrace | None:
        uid = str(record.get(uid_key) or record.get(name_key) or "")
        if not uid:
            return None
        found = trace.pods.get(uid)
        if found is None:
            found = trace.pods[uid] = PodTrace(str(record.get(name_key) or uid), uid)
        elif record.get(name_key) and found.pod == uid:
            found.pod = str(record[name_key])
        return found

    for line in lines:
        line = line.strip()
        if not line:
            continue
        try:
            record = json.loads(line)
        except ValueError:
            trace.skipped_lines += 1
            continue
        if not isinstance(record, dict):
            trace.skipped_lines += 1
            continue
        trace.json_lines += 1
        event = str(record.get("event", ""))
        plugin = str(record.get("plugin", ""))
        instance = str(record.get("instance", ""))
        stamp = str(record.get("timestamp", ""))
        if event in ("assignment.acquired", "assignment.reassigned"):
            if event == "assignment.reassigned":
                previous = cycle_of.get((plugin, str(record.get("previous_pod_uid", ""))))
                if previous is not None and not previous.ended:
                    previous.ended = f"reassigned to {record.get('pod', '?')} (its cycle was over)"
            pod = pod_trace(record)
            if pod is None:
                continue
            started = PluginCycle(plugin, instance, stamp)
            started.events.append(f"{stamp} {event.split('.', 1)[1]} {instance}")
            pod.cycles.append(started)
            serving[(plugin, instance)] = started
            cycle_of[(plugin, pod.pod_uid)] = started
        elif event in ("assignment.to_binding", "assignment.released"):
            pod = pod_trace(record)
            cycle = cycle_of.get((plugin, pod.pod_uid)) if pod else None
            if cycle is None:
                continue
            what = "to binding" if event == "assignment.to_binding" else f"released ({record.get('why', '')})"
            cycle.events.append(f"{stamp} {what} {instance}")
            if event == "assignment.released":
                cycle.ended = what
        elif event == "instance.discarded":
            cycle = serving.get((plugin, instance))
            if cycle is not None and not cycle.ended:
                cycle.ended = f"discarded ({record.get('trap', '')})"
                cycle.events.append(f"{stamp} discarded {instance}: {record.get('trap', '')}")
        elif event == "call.finished":
            pod = pod_trace(record)
            cycle = cycle_of.get((plugin, pod.pod_uid)) if pod else None
            if cycle is not None:
                cycle.calls.append((str(record.get("extension_point", "")), instance, str(record.get("phase", ""))))
        elif event == "cycle.finished":
            pod = pod_trace(record)
            if pod is not None:
                detail = record.get("node") or record.get("reason") or ""
                pod.outcomes.append(f"{record.get('phase', '')} {record.get('outcome', '')} {detail}".strip())
        elif event in ("guest.log", "guest.event", "call.trapped"):
            pod = pod_trace(record)
            if pod is not None:
                text = record.get("message") or record.get("note") or record.get("trap") or ""
                pod.guest_lines.append(f"{stamp} {event} [{plugin}] {text}")
    for pod in trace.pods.values():
        for cycle in pod.cycles:
            if not cycle.ended:
                trace.open_cycles.append((pod.pod_uid, cycle.plugin, cycle.instance, "still assigned"))
    return trace


def _compress(calls: list[tuple[str, str, str]]) -> str:
    """'prefilter, filter x3, score x3' from consecutive calls."""
    parts: list[str] = []
    last, count = "", 0
    for point, _instance, _phase in calls:
        if point == last:
            count += 1
            continue
        if last:
            parts.append(f"{last} x{count}" if count > 1 else last)
        last, count = point, 1
    if last:
        parts.append(f"{last} x{count}" if count > 1 else last)
    return ", ".join(parts)


def matching_pods(trace: Trace, pod_filter: str = "") -> list[str]:
    """UIDs of the pods `pod_filter` names (its namespace/name, name or uid; every pod when empty), in log order."""
    return [uid for uid, pod in trace.pods.items()
            if not pod_filter or pod_filter in (uid, pod.pod, pod.pod.split("/")[-1])]


def render(trace: Trace, pod_filter: str = "") -> list[str]:
    """Text lines of the timelines, one block per pod (or only the pods `pod_filter` names: `matching_pods`)."""
    lines: list[str] = []
    selected = set(matching_pods(trace, pod_filter))
    for uid, pod in trace.pods.items():
        if uid not in selected:
            continue
        lines.append(f"{pod.pod} (uid {uid})")
        for cycle in pod.cycles:
            lines.append(f"  [{cycle.plugin}] instance {cycle.instance}")
            lines.extend(f"    {event}" for event in cycle.events)
            if cycle.calls:
                lines.append(f"    calls: {_compress(cycle.calls)}")
            lines.append(f"    ended: {cycle.ended or 'still assigned at the end of the log'}")
        lines.extend(f"  guest: {text}" for text in pod.guest_lines)
        lines.extend(f"  outcome: {outcome}" for outcome in pod.outcomes)
        lines.extend(f"  PROBLEM: {problem}" for problem in pod.problems)
    return lines

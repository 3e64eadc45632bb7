"""Which CPUs the scheduler's threads run on (``--cpus``).

This module owns the process's CPU placement: ``auto`` (the default of ``simulate`` and
``bench``) keeps all of a command's threads on the CPU its main thread starts on, so
the GIL's many hand-offs a pod are same-CPU switches with warm caches; ``all`` leaves
placement to the operating system (the long-running ``extender``'s default); a list
such as ``0``, ``2,3`` or ``0-3`` names the CPUs. Linux places threads, not processes:
threads that exist are moved one by one, later ones inherit the choice, and
`Pinning.restore` puts every thread back. `docs/performance.md` ("One CPU for the GIL's
hand-offs") has the measurements.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from wasm_scheduler.adapters.framework.errors import UserError
from wasm_scheduler.logger import get_logger

log = get_logger("adapters.cpu_affinity")

#: The values --cpus takes besides a list of CPUs.
AUTO = "auto"
ALL = "all"


def supported() -> bool:
    """Can this platform place threads on CPUs (Linux can)?"""
    return hasattr(os, "sched_setaffinity") and Path("/proc/self/task").is_dir()


def allowed_cpus() -> frozenset[int]:
    """The CPUs this process may run on now."""
    if not hasattr(os, "sched_getaffinity"):
        return frozenset(range(os.cpu_count() or 1))
    return frozenset(os.sched_getaffinity(0))


def parse_cpus(spec: str, allowed: frozenset[int]) -> frozenset[int] | None:
    """The CPUs `spec` names: None for ``all``, one of `allowed` for ``auto``. A UserError
    names the problem (a bad list, a CPU the process may not use)."""
    text = spec.strip().lower()
    if text == ALL:
        return None
    if text == AUTO:
        current = current_cpu()
        return frozenset({current if current in allowed else min(allowed)})
    cpus: set[int] = set()
    for part in text.split(","):
        first, dash, last = part.strip().partition("-")
        try:
            low = int(first)
            high = int(last) if dash else low
        except ValueError:
            raise UserError(f"--cpus {spec}: expected auto, all or CPU numbers such as 0 or 0,2 or 0-3") from None
        if low < 0 or high < low:
            raise UserError(f"--cpus {spec}: {part.strip()!r} is not a CPU range")
        # Only CPUs this process may use can be named: check before expanding a range.
        named = range(low, high + 1)
        outside = frozenset(named) - allowed if len(named) <= len(allowed) else None
        if outside is None or outside:
            shown = _ranges(outside) if outside else f"{low}-{high}"
            raise UserError(f"--cpus {spec}: CPU {shown} is not available to this process "
                            f"(it may use {_ranges(allowed)})")
        cpus.update(named)
    return frozenset(cpus)


def current_cpu() -> int:
    """The CPU the calling thread runs on (field 39 of /proc/thread-self/stat); -1 if unknown."""
    try:
        stat = Path("/proc/thread-self/stat").read_text()
    except OSError:
        return -1
    # The command name (field 2) may hold spaces: count fields after its closing parenthesis.
    fields = stat.rsplit(")", 1)[-1].split()
    try:
        return int(fields[36])
    except (IndexError, ValueError):
        return -1


def _thread_ids() -> list[int]:
    try:
        return [int(entry.name) for entry in Path("/proc/self/task").iterdir() if entry.name.isdigit()]
    except OSError:
        return [os.getpid()]


def _place_threads(place: Callable[[int], frozenset[int]]) -> dict[int, frozenset[int]]:
    """Every thread of the process onto `place(tid)`; each moved thread's CPUs before.

    The threads are listed again after each pass, so one started meanwhile by a thread
    not yet moved is moved too (three passes at most). A thread that ended meanwhile, or
    that the system will not move (not ours, or outside the process's cpuset), is left
    as it is: placement is a speed-up, never a reason for a command to fail."""
    moved: dict[int, frozenset[int]] = {}
    for _ in range(3):
        fresh = [tid for tid in _thread_ids() if tid not in moved]
        if not fresh:
            break
        for tid in fresh:
            try:
                previous = frozenset(os.sched_getaffinity(tid))
                os.sched_setaffinity(tid, place(tid))
            except OSError as exc:
                log.debug("process.cpus_skipped", thread=tid, error=str(exc))
                continue
            moved[tid] = previous
    return moved


@dataclass
class Pinning:
    """What `apply_cpus` did, and how to undo it."""

    #: The CPUs the threads now run on; None when placement was left as it was.
    cpus: frozenset[int] | None
    #: Where the process could run before.
    before: frozenset[int]
    #: Each moved thread's own CPUs before (threads started since return to `before`).
    previous: dict[int, frozenset[int]] = field(default_factory=dict, repr=False)

    def restore(self) -> None:
        """Every thread back where it was (one started meanwhile: where the process could run)."""
        if self.cpus is not None and supported():
            _place_threads(lambda tid: self.previous.get(tid, self.before))

    def describe(self) -> str:
        return "all" if self.cpus is None else _ranges(self.cpus)


def apply_cpus(spec: str) -> Pinning:
    """Place every thread of this process on the CPUs `spec` names (see the module)."""
    before = allowed_cpus()
    if not supported():
        if spec.strip().lower() in (AUTO, ALL):
            return Pinning(None, before)
        raise UserError(f"--cpus {spec}: this platform cannot place threads on CPUs; use --cpus all")
    cpus = parse_cpus(spec, before)
    if cpus is None or cpus == before:
        return Pinning(None, before)  # nothing to move, nothing to put back
    moved = _place_threads(lambda tid: cpus)
    log.info("process.cpus", cpus=_ranges(cpus), available=_ranges(before), threads=len(moved))
    return Pinning(cpus, before, moved)


def _ranges(cpus: frozenset[int]) -> str:
    """0,1,2,5 -> '0-2,5'."""
    out: list[str] = []
    for cpu in sorted(cpus):
        if out and out[-1].split("-")[-1] == str(cpu - 1):
            out[-1] = f"{out[-1].split('-')[0]}-{cpu}"
        else:
            out.append(str(cpu))
    return ",".join(out)


__all__ = ["AUTO", "ALL", "Pinning", "allowed_cpus", "apply_cpus", "current_cpu", "parse_cpus", "supported"]

"""The lifecycle of a pod's instance: which instance serves which pod, and until when.

This module owns `Assignments`, the one place the rules are decided. The supervisor
actor (`actors/supervisor.py`) owns one per plugin, applies every transition the
facade sends it here, and gives instances to it from its pool and takes back the ones
it frees; nothing else keeps a copy of these rules.

| transition                          | what happens                                             |
|-------------------------------------|----------------------------------------------------------|
| `begin(P)` (PreFilter)              | the slot's instance is reassigned to P (the last pod's   |
|                                     | cycle is over: it never reached Permit, or its guest has |
|                                     | no binding-cycle export); an empty or discarded slot     |
|                                     | takes an instance from the pool (`assign_slot`)          |
| `route(P)` (any other call of P)    | P's instance: the slot if it holds P, else the binding   |
|                                     | map (a binding-cycle call: the binding map first, else   |
|                                     | the slot); none: P's cycle ended or never began; a       |
|                                     | tombstone: P's instance was discarded mid-cycle          |
| `to_binding(P)` (after Permit, for a| P's instance moves from the slot to the binding map; an  |
|  guest with binding-cycle exports:  | older binding assignment of P (a pod scheduled again     |
|  `moves_to_binding`)                | while its last binding cycle ran) goes back to the pool  |
| `release(P)` (end of the binding    | P's instance goes back to the pool: the binding map's if |
|  cycle, Unreserve, any failure)     | P has one, else the slot's if it holds P; else nothing   |
| `discard(I)` (instance I trapped or | every pod I served keeps a tombstone, so the rest of its |
|  its actor died)                    | cycle gets Error, never a fresh instance without state   |

An instance is in at most one place here (the slot or one pod's binding entry); the
pool (idle, lent, gone) is the supervisor's. A guest that exports none of prebind,
bind, postbind and unreserve can never be called for a pod after its Permit, so its
pods keep the slot through Permit (`moves_to_binding` is False) and the next pod's
PreFilter takes it over as it takes over a rejected pod's.

See `docs/abi-notes.md` for where these rules differ from the reference host.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Literal

from wasm_scheduler.framework_api import BINDING_CYCLE_EXPORTS, Cycle

#: What a pod's assignment becomes when its instance is discarded: calls of its cycle get Error.
TOMBSTONE = ""

#: Where a live instance is: the scheduling slot or a pod's binding entry (here), idle in
#: the pool or lent outside every cycle (the supervisor's).
Place = Literal["slot", "binding", "idle", "lent"]


def moves_to_binding(exports: frozenset[str]) -> bool:
    """Does a pod of this guest hold its instance through its binding cycle (from Permit on)?"""
    return bool(BINDING_CYCLE_EXPORTS & exports)


@dataclass(frozen=True, slots=True)
class Held:
    """One assignment: the pod and the instance serving it (or TOMBSTONE)."""

    pod_uid: str
    pod: str
    instance_id: str


@dataclass
class Assignments:
    """Pod -> instance assignments of one plugin: the scheduling slot and the binding map."""

    slot: Held | None = None
    binding: dict[str, Held] = field(default_factory=dict)

    def reusable_slot(self, known: Callable[[str], bool]) -> Held | None:
        """The slot's assignment whose instance the next cycle takes over (not discarded,
        and still `known` to the pool)."""
        slot = self.slot
        if slot is not None and slot.instance_id != TOMBSTONE and known(slot.instance_id):
            return slot
        return None

    def assign_slot(self, pod_uid: str, pod: str, instance_id: str) -> Held | None:
        """P's cycle begins on `instance_id` (the reusable slot's, or one from the pool);
        the slot's previous assignment, whose cycle this ends."""
        previous = self.slot
        self.slot = Held(pod_uid, pod, instance_id)
        return previous

    def clear_slot(self) -> None:
        """No instance could be had for the pod beginning its cycle: the slot is empty."""
        self.slot = None

    def route(self, pod_uid: str, binding_first: bool = False) -> str | None:
        """The instance serving the pod (TOMBSTONE: discarded), or None."""
        held = self.binding.get(pod_uid) if binding_first else None
        if held is None and self.slot is not None and self.slot.pod_uid == pod_uid:
            held = self.slot
        if held is None:
            held = self.binding.get(pod_uid)
        return held.instance_id if held is not None else None

    def to_binding(self, pod_uid: str) -> tuple[Held | None, Held | None]:
        """P's slot assignment moves to the binding map: (what moved, the older binding
        assignment it replaced, whose live instance goes back to the pool)."""
        slot = self.slot
        if slot is None or slot.pod_uid != pod_uid:
            return None, None
        self.slot = None
        superseded = self.binding.get(pod_uid)
        self.binding[pod_uid] = slot
        return slot, superseded

    def release(self, pod_uid: str) -> tuple[Held, Cycle] | None:
        """P's cycle is over: its assignment (binding map first, else the slot) and the cycle it served."""
        held = self.binding.pop(pod_uid, None)
        if held is not None:
            return held, "binding"
        if self.slot is not None and self.slot.pod_uid == pod_uid:
            held, self.slot = self.slot, None
            return held, "scheduling"
        return None

    def discard(self, instance_id: str) -> None:
        """The instance is gone: every pod it served keeps a tombstone."""
        if self.slot is not None and self.slot.instance_id == instance_id:
            self.slot = Held(self.slot.pod_uid, self.slot.pod, TOMBSTONE)
        for uid, held in self.binding.items():
            if held.instance_id == instance_id:
                self.binding[uid] = Held(uid, held.pod, TOMBSTONE)

    def held(self) -> Iterator[tuple[Held, Place]]:
        """Every assignment with a live instance and where it is ("slot" or "binding")."""
        if self.slot is not None and self.slot.instance_id != TOMBSTONE:
            yield self.slot, "slot"
        for held in self.binding.values():
            if held.instance_id != TOMBSTONE:
                yield held, "binding"

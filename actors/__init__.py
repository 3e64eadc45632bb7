"""The concurrency model: one Pykka actor per wasm instance, and their supervisor.

- `guest_actor.GuestActor` owns one `guest_instance.GuestInstance` (store, WASI, host
  functions) and runs its calls one at a time: its mailbox is the only lock.
- `supervisor.SupervisorActor` tracks pod -> actor assignments across the scheduling and
  binding cycles and keeps the idle pool, applying the lifecycle's rules, which live in
  `assignments.Assignments`. `cycle_cache.CycleCache` is what a plugin facade remembers
  of the supervisor's answers for the rest of each pod's cycle.
- An instance is *broken* once it can no longer run calls: a call trapped (a deadline
  and a fault count as traps), the host erred serving it, it never started, or its
  actor died. Its actor (or the facade) tells the supervisor (`InstanceBroken`), which
  *discards* it: stops its actor, leaves a tombstone for the pods it served, tops the
  pool up. *Trapped* names only the first cause (`PoolCounts.trapped`).
- `abi` is the guest ABI as data; `host_functions`, `wasi` and `guest_memory` are what a
  guest can reach of the host.
- `kube` (schema, codec, wire cache: Kubernetes objects as protobuf bytes) lives here
  because its one user is the guest's host functions, which hand those bytes to the
  guest.

See `docs/abi-notes.md` for the lifecycle and `docs/reliability.md` for faults.
"""

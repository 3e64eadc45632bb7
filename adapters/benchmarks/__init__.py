"""The benchmarks: `wasm-scheduler bench` and the measurements beside it.

`throughput` runs the bench's variants side by side, `workload` makes its objects,
`micro` takes the call figures, `native_nodenumber` and `extender_client` are its native
and extender variants; `constraints`, `extender_nodes` and `guest_cost` are commands of
their own. See `docs/performance.md`.
"""

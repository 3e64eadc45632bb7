"""The benchmarks: `wasm-scheduler bench` and the measurements beside it.

`throughput` runs the bench's variants side by side, `workload` makes its objects,
`micro` takes the call figures, `constraints` and `extender_nodes` are commands of their
own. See `docs/performance.md`.
"""

"""The scheduler-facing side: what embeds the runtime.

`wasm_plugin.WasmPlugin` is the facade of one configured wasm plugin (the
kube-scheduler extension points as methods, each routed through the plugin's
supervisor); `framework` is the in-process scheduling framework; `cli` is the
`wasm-scheduler` command.

See `docs/framework.md` and `docs/extender.md`.
"""

"""The embedded default inputs of `wasm-scheduler simulate` and the NodeNumber guest (package data)."""

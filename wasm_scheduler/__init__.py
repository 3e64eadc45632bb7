"""wasm-scheduler: run Kubernetes scheduler plugins compiled to WebAssembly from Python.

This package owns the project's one import name and its small public API. Its parts
are the checkout's top-level folders, mapped beneath it by pyproject.toml (`actors/` is
`wasm_scheduler.actors`, and so on; a wheel holds copies beneath it):
`wasm_scheduler.actors` (guest instances and the supervisor), `wasm_scheduler.registry`
(plugin configuration, fetching and compiling guests), `wasm_scheduler.adapters` (the
plugin facade, the in-process scheduling framework, the extender, the CLI) and
`wasm_scheduler.examples` (the embedded default inputs and the NodeNumber guest).

The public API, imported on first use:

- `GuestCompiler`, `PluginConfig`, `WasmPlugin`: load a guest and drive a pod's cycle
  through its extension points (`WasmPlugin.load(PluginConfig.from_args(...), compiler)`);
- `Status`, `Code`: what an extension point answers;
- `load_inputs(config_path, cluster_path)` and `simulate(config, cluster)`: schedule a
  cluster snapshot with a scheduler configuration, as `wasm-scheduler simulate` does
  (None for either path: the embedded default).

See README.md ("Using a plugin from Python").
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

_API = {
    "GuestCompiler": "wasm_scheduler.registry.compiler",
    "PluginConfig": "wasm_scheduler.registry.config",
    "WasmPlugin": "wasm_scheduler.adapters.wasm_plugin",
    "Status": "wasm_scheduler.framework_api",
    "Code": "wasm_scheduler.framework_api",
    "load_inputs": "wasm_scheduler.adapters.framework.simulation",
    "simulate": "wasm_scheduler.adapters.framework.simulation",
}

__all__ = ["Code", "GuestCompiler", "PluginConfig", "Status", "WasmPlugin", "load_inputs", "simulate"]

if TYPE_CHECKING:
    from wasm_scheduler.adapters.framework.simulation import load_inputs, simulate
    from wasm_scheduler.adapters.wasm_plugin import WasmPlugin
    from wasm_scheduler.framework_api import Code, Status
    from wasm_scheduler.registry.compiler import GuestCompiler
    from wasm_scheduler.registry.config import PluginConfig


def __getattr__(name: str) -> Any:
    module = _API.get(name)
    if module is None:
        raise AttributeError(f"module 'wasm_scheduler' has no attribute {name!r}")
    return getattr(import_module(module), name)

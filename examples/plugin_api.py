"""Run one wasm scheduler plugin by hand: PreFilter, Filter, PreScore and Score for one
pod over a few nodes, through the plugin's actors.

    python examples/plugin_api.py

The guest is the NodeNumber example (examples/nodenumber): PreScore keeps the pod
name's last digit in the instance's memory, Score favours nodes ending in it. Both
calls reach the same instance because the pod's cycle is pinned to it.
"""

from __future__ import annotations

from pathlib import Path

from wasm_scheduler.adapters.logs import configure_logging
from wasm_scheduler.adapters.wasm_plugin import WasmPlugin
from wasm_scheduler.registry.compiler import GuestCompiler
from wasm_scheduler.registry.config import PluginConfig

HERE = Path(__file__).resolve().parent


def main() -> dict[str, int]:
    configure_logging("warning")  # logs to stderr; "info" shows every assignment
    config = PluginConfig.from_args("NodeNumber", {"guestURL": "nodenumber/nodenumber.wasm"}, base_dir=str(HERE))
    # The plugin compiles once and starts one instance in its actor; both are closed on leaving.
    with GuestCompiler() as compiler, WasmPlugin.load(config, compiler) as plugin:
        pod = {"metadata": {"name": "web-3", "namespace": "default", "uid": "uid-web-3"},
               "spec": {"containers": [{"name": "web", "image": "nginx"}]}}
        nodes = ["node-1", "node-3", "node-13", "node-7"]
        print("implements:", ", ".join(sorted(plugin.extension_points)))
        print("PreFilter:", plugin.pre_filter(None, pod).status)
        feasible = [n for n, status in plugin.filter_nodes(None, pod, nodes).items() if status.ok]
        print("Filter passes:", feasible)
        print("PreScore:", plugin.pre_score(None, pod, feasible))
        result = plugin.score_nodes(None, pod, feasible)  # one actor message for all nodes
        scores = {s.name: s.score for s in result.scores}
        print("Score:", result.status, scores)
        print("pool:", plugin.counts())
        return scores


if __name__ == "__main__":
    main()

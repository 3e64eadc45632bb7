"""How the extender's verbs scale with the number of nodes.

Run it as `python -m wasm_scheduler.adapters.benchmarks.extender_nodes [--nodes 5000 50000]`.

This module owns one on-demand figure: the wall time of `filter` and `prioritize` of
the NodeNumber guest behind the HTTP extender, for clusters of several sizes (5,000
and 50,000 nodes by default), each verb asked with node names (`nodeCacheCapable`)
and, for the smaller sizes, with whole `v1.NodeList` bodies. Each size's time per
node is printed as a ratio to the smallest size's, measured in the same run: a verb
that is linear in nodes stays near 1.0, a quadratic one grows with the size ratio.
Nothing here is asserted: these machines are shared and noisy.

See `docs/performance.md` ("The extender over many nodes").
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from wasm_scheduler.adapters.benchmarks.workload import node, pod
from wasm_scheduler.adapters.extender.nodes import NodeCache
from wasm_scheduler.adapters.extender.server import ExtenderServer
from wasm_scheduler.adapters.extender.service import ExtenderService, WeightedPlugin
from wasm_scheduler.adapters.framework.simulation import examples_dir
from wasm_scheduler.adapters.logs import configure_logging
from wasm_scheduler.adapters.wasm_plugin import WasmPlugin
from wasm_scheduler.registry.compiler import GuestCompiler
from wasm_scheduler.registry.config import PluginConfig

#: Largest size whose verbs are also measured with whole node objects in the body.
MAX_OBJECT_NODES = 10_000


@dataclass(frozen=True)
class Figure:
    nodes: int
    verb: str
    body: str  # "names" or "objects"
    seconds: float  # median of the repetitions

    @property
    def us_per_node(self) -> float:
        return self.seconds * 1e6 / self.nodes


def _post(url: str, verb: str, data: bytes) -> Any:
    request = urllib.request.Request(f"{url}/{verb}", data=data, method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=600) as response:
        return json.loads(response.read())


def _body(kind: str, pod: dict[str, Any], names: list[str], nodes: list[dict[str, Any]]) -> dict[str, Any]:
    """ExtenderArgs with node names (nodeCacheCapable) or whole node objects."""
    if kind == "names":
        return {"Pod": pod, "NodeNames": names}
    return {"Pod": pod, "Nodes": {"metadata": {}, "items": nodes}}


def _loader(nodes: list[dict[str, Any]]) -> Callable[[], tuple[Sequence[Any], Sequence[Any]]]:
    def load() -> tuple[Sequence[Any], Sequence[Any]]:
        return nodes, ()
    return load


def measure(sizes: Sequence[int], repeats: int = 3) -> list[Figure]:
    """filter and prioritize of the NodeNumber guest at every size, `repeats` times each."""
    guest = examples_dir() / "nodenumber" / "nodenumber.wasm"
    figures: list[Figure] = []
    with GuestCompiler() as compiler:
        for size in sizes:
            width = len(str(size - 1))
            nodes = [node(i, width) for i in range(size)]
            names = [n["metadata"]["name"] for n in nodes]
            cache = NodeCache(_loader(nodes))
            cache.refresh()
            with (WasmPlugin.load(PluginConfig("NodeNumber", str(guest)), compiler) as plugin,
                  ExtenderService([WeightedPlugin(plugin)], cache, expect_bind=False) as service):
                server = ExtenderServer(("127.0.0.1", 0), service).start_background()
                try:
                    kinds = ("names", "objects") if size <= MAX_OBJECT_NODES else ("names",)
                    for body_kind in kinds:
                        # Each pod's filter then its prioritize, as kube-scheduler calls them.
                        times: dict[str, list[float]] = {"filter": [], "prioritize": []}
                        for i in range(repeats):
                            data = json.dumps(_body(body_kind, pod(f"web-{i}"), names, nodes)).encode()
                            for verb, verb_times in times.items():
                                started = time.perf_counter()
                                _post(server.url, verb, data)
                                verb_times.append(time.perf_counter() - started)
                        figures.extend(Figure(size, verb, body_kind, statistics.median(verb_times))
                                       for verb, verb_times in times.items())
                finally:
                    server.stop()
    return figures


def render(figures: Sequence[Figure]) -> str:
    """One row per (verb, body, size): ms, us a node, and the per-node ratio to the smallest size."""
    base: dict[tuple[str, str], float] = {}
    rows = [f"{'verb':<11}{'body':<9}{'nodes':>8}{'ms':>11}{'us/node':>10}{'x smallest':>12}"]
    for fig in sorted(figures, key=lambda f: (f.verb, f.body, f.nodes)):
        key = (fig.verb, fig.body)
        base.setdefault(key, fig.us_per_node)
        rows.append(f"{fig.verb:<11}{fig.body:<9}{fig.nodes:>8}{fig.seconds * 1000:>11.1f}"
                    f"{fig.us_per_node:>10.2f}{fig.us_per_node / base[key]:>12.2f}")
    return "\n".join(rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m wasm_scheduler.adapters.benchmarks.extender_nodes",
                                     description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, nargs="+", default=[5000, 50000], help="cluster sizes")
    parser.add_argument("--repeats", type=int, default=3, help="requests per verb and size (the median counts)")
    args = parser.parse_args(argv)
    configure_logging("warning")
    print(render(measure(sorted(args.nodes), args.repeats)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

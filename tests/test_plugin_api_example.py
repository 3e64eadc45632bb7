"""The README's library example runs and shows cycle state across PreScore and Score."""

from __future__ import annotations

import importlib.util

from tests.conftest import EXAMPLES


def test_plugin_api_example_scores_nodes_ending_in_the_pods_digit(capsys) -> None:
    spec = importlib.util.spec_from_file_location("plugin_api", EXAMPLES / "plugin_api.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    scores = module.main()
    assert scores == {"node-1": 0, "node-3": 100, "node-13": 100, "node-7": 0}
    out = capsys.readouterr().out
    assert "PreFilter: Success (NodeNumber)" in out and "started=1" in out

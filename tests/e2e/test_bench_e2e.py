"""The end-to-end benchmark (`python -m tests.e2e.bench`) runs: every variant, a tiny size."""

from __future__ import annotations

import pytest

from tests.e2e.bench import VARIANTS, WASM_PLUGIN, bench, main
from tests.e2e.cluster import Harness
from wasm_scheduler.adapters.benchmarks.workload import Workload


def test_every_variant_binds_every_measured_pod(harness: Harness) -> None:
    results = bench(harness, Workload(nodes=10, init_pods=10, pods=20), rounds=1, variants=VARIANTS)
    assert [r.variant for r in results] == list(VARIANTS)
    for result in results:
        assert result.pods == 20 and result.pods_per_second > 0, result
        if result.variant != "simulate":
            assert 0 < result.p50_ms <= result.p99_ms, result
            assert result.cpu_s_per_pod["kube-scheduler"] > 0, result


@pytest.mark.parametrize("argv", [
    ["--variants", WASM_PLUGIN],
    ["--variants", "default,nonsense"],
    ["--guest", "/nonexistent/guest.wasm"],
    ["--wasm-plugin-scheduler", "/nonexistent/kube-scheduler"],
])
def test_a_wrong_command_line_is_one_clear_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """Checked before anything is built or started: the Go host's variant needs its binary."""
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith("usage:") is False and ("--wasm-plugin-scheduler" in error or "unknown variants" in error
                                                     or "no such file" in error), error

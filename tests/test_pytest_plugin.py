"""The pytest plugin for guest authors (wasm_scheduler.testing): its fixtures on real
guests, an author's ten-line test run by pytest itself, and its entry point."""

from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

import wasm_scheduler.testing as testing
from tests.conftest import EXAMPLES, GUESTS
from wasm_scheduler.framework_api import Code
from wasm_scheduler.registry.config import PluginConfigError
from wasm_scheduler.registry.errors import GuestLoadError
from wasm_scheduler.testing import node, pod, run_cycle

pytest_plugins = ["wasm_scheduler.testing"]

ROOT = Path(__file__).resolve().parents[1]
NODENUMBER = EXAMPLES / "nodenumber" / "nodenumber.wasm"

#: A guest whose Permit says Wait (status in the high 32 bits, 100 ms in the low ones).
WAITING_WAT = """(module
  (memory (export "memory") 1)
  (func (export "prefilter") (result i32) (i32.const 0))
  (func (export "filter") (result i32) (i32.const 0))
  (func (export "permit") (result i64) (i64.const 0x0000000400000064))
  (func (export "unreserve")))
"""

#: A guest whose PreFilter rejects every pod and whose PostFilter answers Success.
REJECTING_WAT = """(module
  (memory (export "memory") 1)
  (func (export "prefilter") (result i32) (i32.const 2))
  (func (export "filter") (result i32) unreachable)
  (func (export "postfilter") (result i64) (i64.const 0)))
"""

#: A guest whose Score gives every node 101, one more than a score may be.
GREEDY_WAT = """(module
  (memory (export "memory") 1)
  (func (export "score") (result i64) (i64.const 0x0000006500000000)))
"""


def author_test() -> str:
    """The author's test shown in the module docstring (and in docs/guest-authors.md)."""
    doc = testing.__doc__ or ""
    start = doc.index("::\n", doc.index("A guest author's whole test")) + 3
    end = doc.index("\nFixtures:")
    return textwrap.dedent(doc[start:end]).strip() + "\n"


# --- the fixtures on real guests -------------------------------------------------------

def test_nodenumber_cycle_scores_nodes_ending_in_the_pods_digit(wasm_guest) -> None:
    plugin = wasm_guest(NODENUMBER, name="NodeNumber", args=["nodenumber"])
    result = run_cycle(plugin, pod("web-3"), [node("node-1"), node("node-3"), node("node-13"), "node-7"])
    assert result.pre_filter.ok and result.pre_score is not None and result.pre_score.ok
    assert result.filter == {}  # NodeNumber has no filter: every node is feasible
    assert result.feasible == ["node-1", "node-3", "node-13", "node-7"]
    assert result.scores == {"node-1": 0, "node-3": 100, "node-13": 100, "node-7": 0}
    assert result.node == "node-13"  # a tie goes to the first name in sorted order
    assert result.bound and not result.unreserved and result.bind is None
    assert result.failures == [] and result.statuses["Score"].plugin == "NodeNumber"
    # A second pod on the same plugin: PreFilter resets the state PreScore left.
    again = run_cycle(plugin, pod("web-7"), ["node-1", "node-7"])
    assert again.scores == {"node-1": 0, "node-7": 100} and again.node == "node-7"


def test_wasm_logs_captures_the_guests_klog_lines(wasm_logs, wasm_guest) -> None:
    plugin = wasm_guest(NODENUMBER, args=["nodenumber"])
    run_cycle(plugin, pod("web-3"), ["node-3"])
    lines = [e for e in wasm_logs if e["event"] == "guest.log"]
    assert [e["message"] for e in lines] == ["NodeNumber: pod name ends in digit 3"]
    assert lines[0]["plugin"] == "nodenumber" and lines[0]["pod"] == "default/web-3"


def test_cyclestate_guest_passes_every_point_and_resets_in_prefilter(wasm_guest) -> None:
    plugin = wasm_guest(GUESTS / "cyclestate.wat")
    for name in ("a", "b"):  # the second cycle checks the first one's state was dropped
        result = run_cycle(plugin, pod(name), ["node-b", "node-a", "node-c"])
        assert result.failures == []
        assert list(result.statuses) == [
            "PreFilter", "Filter node-b", "Filter node-a", "Filter node-c", "PreScore", "Score",
            "NormalizeScore", "Reserve", "Permit", "PreBind", "Bind",
        ]
        assert result.scores == {"node-b": 0, "node-a": 0, "node-c": 0}
        assert result.node == "node-a" and result.bind is not None and result.bind.ok and result.bound


def test_cyclestate_postfilter_runs_when_no_node_is_left(wasm_guest) -> None:
    result = run_cycle(wasm_guest(GUESTS / "cyclestate.wat"), pod("lonely"), [])
    assert result.post_filter is not None and result.post_filter.ok
    assert result.node is None and not result.bound and result.feasible == []


def test_checker_trap_in_filter_is_an_error_status_not_an_exception(wasm_guest) -> None:
    plugin = wasm_guest(GUESTS / "checker.wat")
    result = run_cycle(plugin, pod("p"), ["a-1", "x-2"])  # checker traps on a node named x...
    assert result.filter["a-1"].ok
    assert result.filter["x-2"].code == Code.ERROR and "trap in filter" in result.filter["x-2"].reason
    assert result.node is None and not result.bound and result.pre_score is None and result.post_filter is None
    assert [line.split(":")[0] for line in result.failures] == ["Filter x-2"]
    # The pod's instance was discarded; the next pod gets a fresh one. Its Reserve is handed
    # the assumed pod (spec.nodeName set, as kube-scheduler hands it): the same metadata as
    # PreFilter's, so checker lets it through its binding cycle.
    after = run_cycle(plugin, pod("q"), ["a-1"])
    assert after.filter == {"a-1": after.filter["a-1"]} and after.filter["a-1"].ok and after.scores == {"a-1": 1}
    assert after.node == "a-1" and after.reserve is not None and after.reserve.ok
    assert after.bound and not after.unreserved


def test_checker_postfilter_answer_is_recorded(wasm_guest) -> None:
    result = run_cycle(wasm_guest(GUESTS / "checker.wat"), pod("p"), [])
    assert result.post_filter is not None and result.post_filter.code == Code.UNSCHEDULABLE
    assert result.failures == ["PostFilter: Unschedulable (checker)"]


def test_permit_wait_ends_the_cycle_with_unreserve(wasm_guest, tmp_path) -> None:
    (tmp_path / "waiting.wat").write_text(WAITING_WAT)
    result = run_cycle(wasm_guest(tmp_path / "waiting.wat"), pod("p"), ["n1", "n2"])
    assert result.node == "n1" and result.reserve is not None and result.reserve.ok
    assert result.permit is not None and result.permit.code == Code.WAIT and result.permit_timeout_ms == 100
    assert result.unreserved and not result.bound and result.pre_bind is None


def test_prefilter_rejection_skips_filter_and_runs_postfilter(wasm_guest, tmp_path) -> None:
    (tmp_path / "rejecting.wat").write_text(REJECTING_WAT)
    result = run_cycle(wasm_guest(tmp_path / "rejecting.wat"), pod("p"), ["n1", "n2"])
    assert result.pre_filter.code == Code.UNSCHEDULABLE and result.filter == {} and result.feasible == []
    assert result.post_filter is not None and result.post_filter.ok and result.node is None


def test_a_score_out_of_range_fails_the_cycle_as_in_the_scheduler(wasm_guest, tmp_path) -> None:
    (tmp_path / "greedy.wat").write_text(GREEDY_WAT)
    result = run_cycle(wasm_guest(tmp_path / "greedy.wat"), pod("p"), ["n1", "n2"])
    assert result.raw_scores == {"n1": 101, "n2": 101} and result.scores == {}
    assert result.score is not None and result.score.code == Code.ERROR
    assert "invalid score 101" in result.score.reason
    assert result.node is None and not result.bound and result.reserve is None


def test_builders_make_objects_the_guest_can_read(wasm_guest) -> None:
    n = node("gpu-1", labels={"gpu": "true"}, capacity={"cpu": 8}, images={"nginx:1": 1000},
             taints=[{"key": "gpu", "effect": "NoSchedule"}])
    assert n["metadata"]["labels"] == {"kubernetes.io/hostname": "gpu-1", "gpu": "true"}
    assert n["status"]["allocatable"] == {"cpu": "8"} and n["spec"]["taints"][0]["key"] == "gpu"
    handle = testing.NodesHandle([n, node("gpu-2", images={"nginx:1": 1000})])
    assert handle.image_states("gpu-1") == {"nginx:1": {"Size": 1000, "NumNodes": 2}}
    assert handle.get_node("gpu-2") is not None and handle.get_node("nope") is None
    p = pod("web-1", namespace="shop", labels={"app": "web"}, requests={"cpu": "500m"}, node_selector={"gpu": "true"})
    assert p["metadata"]["uid"] == "uid-shop-web-1"
    assert p["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "500m"}}
    # Both encode for the guest: a full cycle through the checker reads the pod at every point.
    result = run_cycle(wasm_guest(GUESTS / "checker.wat"), p, [n])
    assert result.filter["gpu-1"].ok and result.scores == {"gpu-1": 1}


def test_a_guest_that_cannot_load_raises_guest_load_error(wasm_guest, tmp_path) -> None:
    with pytest.raises(GuestLoadError) as missing:
        wasm_guest("no-such-guest.wasm")
    message = str(missing.value)
    assert "\n" not in message and str(Path(__file__).parent / "no-such-guest.wasm") in message
    (tmp_path / "broken.wat").write_text("(module (func (export \"filter\") (result i32)))")
    with pytest.raises(GuestLoadError, match="broken"):
        wasm_guest(tmp_path / "broken.wat")
    with pytest.raises(PluginConfigError, match="logSeverity"):
        wasm_guest(NODENUMBER, logSeverity=9)


# --- an author's test, run by pytest ---------------------------------------------------

def run_pytest(directory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    (directory / "pytest.ini").write_text("[pytest]\n")  # the rootdir: nothing of this checkout applies
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "wasm_scheduler.testing", "-p", "no:cacheprovider", *args],
        cwd=directory, capture_output=True, text=True, timeout=120, check=False,
    )


def test_the_documented_ten_line_test_passes_under_pytest(tmp_path) -> None:
    code = author_test()
    assert len(code.splitlines()) <= 10
    assert f"```python\n{code}```" in (ROOT / "docs" / "guest-authors.md").read_text()
    shutil.copy(NODENUMBER, tmp_path / "main.wasm")
    (tmp_path / "test_guest.py").write_text(code)
    done = run_pytest(tmp_path, "-q", "test_guest.py")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout


def test_a_failing_author_test_fails_with_a_readable_message(tmp_path) -> None:
    shutil.copy(NODENUMBER, tmp_path / "main.wasm")
    code = author_test().replace('assert result.node == "node-3"', 'assert result.node == "node-7"')
    code += textwrap.dedent("""

        def test_a_missing_guest(wasm_guest):
            wasm_guest("missing.wasm")
    """)
    (tmp_path / "test_guest.py").write_text(code)
    done = run_pytest(tmp_path, "-q", "test_guest.py")
    assert done.returncode == 1, done.stdout + done.stderr
    out = done.stdout
    assert "2 failed" in out
    assert "AssertionError: assert 'node-3' == 'node-7'" in out
    assert "FAILED test_guest.py::test_web_3_lands_on_a_node_ending_in_3" in out
    assert f"GuestLoadError: wasm guest 'missing' ({tmp_path / 'missing.wasm'}): no such file" in out
    # The load failure shows the test's line and the error, not the runtime's frames.
    assert "compiler.py" not in out and "wasm_plugin.py" not in out


# --- the entry point -------------------------------------------------------------------

def test_pytest11_entry_point_names_this_plugin() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    entry_points = project["entry-points"]["pytest11"]
    assert entry_points == {"wasm_scheduler.testing": "wasm_scheduler.testing"}
    # Named after its module: pytest then loads it once when `-p wasm_scheduler.testing`
    # or `pytest_plugins` names it too, instead of refusing the second registration.
    module = importlib.import_module(entry_points["wasm_scheduler.testing"])
    assert module is testing
    for fixture in ("wasm_compiler", "wasm_guest", "wasm_logs"):
        assert hasattr(module, fixture), fixture

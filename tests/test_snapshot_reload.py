"""The extender's --cluster snapshot reload: background polling, the last good snapshot
kept on a broken file (one warning per change), no parse on the request path, stop()."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from structlog.testing import capture_logs

from wasm_scheduler.adapters.extender.command import node_cache_from
from wasm_scheduler.adapters.extender.nodes import NodeCache
from wasm_scheduler.adapters.extender.snapshot_reload import SnapshotReloader
from wasm_scheduler.adapters.framework.errors import UserError


def _write(path: Path, nodes: list[str], bump_ns: int = 0) -> None:
    objects = [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": n},
                "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "10"}}} for n in nodes]
    objects.append({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns", "uid": "u1"},
                    "spec": {"containers": [{"name": "c"}]}})
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": objects}))
    _bump(path, bump_ns)


def _bump(path: Path, bump_ns: int) -> None:
    if bump_ns:  # coarse file system clocks: make the change visible whatever the timing
        st = os.stat(path)
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + bump_ns))


def _wait_for(condition: Any, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return bool(condition())


def test_reload_follows_the_file_and_keeps_the_last_good_snapshot(tmp_path: Path) -> None:
    path = tmp_path / "snapshot.yaml"
    _write(path, ["a", "b"])
    cache = node_cache_from(path, poll_s=0.05)
    assert isinstance(cache, SnapshotReloader)
    try:
        assert set(cache.nodes) == {"a", "b"} and set(cache.pods) == {"u1"}

        _write(path, ["a", "b", "c"], bump_ns=1_000_000_000)
        assert _wait_for(lambda: set(cache.nodes) == {"a", "b", "c"})

        with capture_logs() as logs:
            path.write_text("items: [\n")  # broken YAML
            _bump(path, 2_000_000_000)
            assert _wait_for(lambda: any(e["event"] == "extender.snapshot_reload_failed" for e in logs))
            time.sleep(0.3)  # several more polls of the same broken file
            warnings = [e for e in logs if e["event"] == "extender.snapshot_reload_failed"]
            assert len(warnings) == 1, warnings  # once per change, not once per poll
            assert warnings[0]["log_level"] == "warning"
            assert warnings[0]["path"] == str(path)
            assert "invalid YAML" in warnings[0]["reason"] and "\n" not in warnings[0]["reason"]
            assert set(cache.nodes) == {"a", "b", "c"}  # the last good snapshot stays

            path.write_text("kind: [1]\n")  # a second, different breakage: warned again
            _bump(path, 3_000_000_000)
            assert _wait_for(lambda: len([e for e in logs if e["event"] == "extender.snapshot_reload_failed"]) == 2)
            assert set(cache.nodes) == {"a", "b", "c"}

        _write(path, ["d"], bump_ns=4_000_000_000)
        assert _wait_for(lambda: set(cache.nodes) == {"d"})
    finally:
        cache.close()
    assert not cache._thread.is_alive()


def test_refresh_never_parses_on_the_request_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "snapshot.yaml"
    _write(path, ["a"])
    cache = SnapshotReloader(path, poll_s=3600)  # the poller only runs when woken
    try:
        parsed: list[str] = []
        import wasm_scheduler.adapters.extender.snapshot_reload as module

        real = module.load_cluster

        def counting(p: Any) -> Any:
            parsed.append(str(p))
            return real(p)

        monkeypatch.setattr(module, "load_cluster", counting)
        _write(path, ["a", "b"], bump_ns=1_000_000_000)
        cache.refresh()  # returns at once with what is loaded; the poller reloads behind it
        assert set(cache.nodes) <= {"a", "b"}
        assert _wait_for(lambda: set(cache.nodes) == {"a", "b"})
        assert parsed == [str(path)]
        cache.refresh()  # nothing changed: no parse
        time.sleep(0.2)
        assert parsed == [str(path)]
    finally:
        cache.close()


def test_missing_file_later_keeps_the_snapshot(tmp_path: Path) -> None:
    path = tmp_path / "snapshot.yaml"
    _write(path, ["a"])
    cache = SnapshotReloader(path, poll_s=0.05)
    try:
        with capture_logs() as logs:
            path.unlink()
            assert _wait_for(lambda: any(e["event"] == "extender.snapshot_reload_failed" for e in logs))
        assert set(cache.nodes) == {"a"}
        _write(path, ["b"], bump_ns=1_000_000_000)
        assert _wait_for(lambda: set(cache.nodes) == {"b"})
    finally:
        cache.close()


def test_broken_file_at_start_is_a_user_error(tmp_path: Path) -> None:
    path = tmp_path / "snapshot.yaml"
    path.write_text("kind: [1]\n")
    with pytest.raises(UserError, match="kind: expected a string"):
        node_cache_from(path)
    with pytest.raises(UserError, match="no such cluster file|cannot read the node snapshot"):
        node_cache_from(tmp_path / "none.yaml")


def test_no_path_gives_an_empty_cache() -> None:
    cache = node_cache_from(None)
    assert type(cache) is NodeCache and cache.nodes == {}

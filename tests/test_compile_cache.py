"""The on-disk cache of compiled guests: the CLI's default folder, reuse across runs,
two processes at once, damaged and stale entries, `--no-cache`, `--cache-dir`, and a
folder that cannot be written. No test writes into the real user cache folder."""

from __future__ import annotations

import hashlib
import json
import platform
import subprocess
import sys
import textwrap
import time
from importlib.metadata import version
from pathlib import Path

import pytest
import structlog
import wasmtime

from wasm_scheduler.adapters.cli import build_parser, cache_dir_of, main
from wasm_scheduler.adapters.extender.command import ExtenderOptions, RunningExtender
from wasm_scheduler.registry.compiler import GuestCompiler, default_cache_dir
from wasm_scheduler.registry.config import PluginConfig

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
NODENUMBER = PluginConfig.from_args("NodeNumber", {"guestURL": "nodenumber/nodenumber.wasm"}, base_dir=EXAMPLES)


@pytest.fixture(autouse=True)
def _private_cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test here gets its own XDG_CACHE_HOME, so the CLI's default never reaches ~/.cache."""
    home = tmp_path / "xdg-cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    return home


def _entries(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.cwasm")) if folder.is_dir() else []


def _loaded_origins(err: str) -> list[str]:
    """The `origin` of every guest.loaded event of a JSON log."""
    events = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    return [e["origin"] for e in events if e.get("event") == "guest.loaded"]


def _simulate(capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, list[str], str]:
    code = main(["--log-format", "json", "--log-level", "info", "simulate", "--output", "json", "--cpus", "all",
                 *extra])
    out, err = capsys.readouterr()
    json.loads(out)  # the result stays one JSON document
    return code, _loaded_origins(err), err


def _load(folder: Path | None) -> tuple[str, list[dict[str, object]]]:
    with GuestCompiler(cache_dir=folder) as compiler, structlog.testing.capture_logs() as logs:
        origin = compiler.load(NODENUMBER).origin
    return origin, logs


# --- where the cache is --------------------------------------------------------------------------


def test_default_cache_dir_follows_each_platforms_convention(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert default_cache_dir({"XDG_CACHE_HOME": "/var/cache/me"}, home, "linux") == Path("/var/cache/me/wasm-scheduler")
    assert default_cache_dir({}, home, "linux") == home / ".cache" / "wasm-scheduler"
    # The XDG spec: a relative path is invalid and ignored.
    assert default_cache_dir({"XDG_CACHE_HOME": "relative"}, home, "linux") == home / ".cache" / "wasm-scheduler"
    assert default_cache_dir({}, home, "darwin") == home / "Library" / "Caches" / "wasm-scheduler"
    assert default_cache_dir({"LOCALAPPDATA": "C:/Users/me/AppData/Local"}, home, "win32") == \
        Path("C:/Users/me/AppData/Local") / "wasm-scheduler" / "Cache"


def test_xdg_cache_home_is_honoured_by_the_cli(capsys: pytest.CaptureFixture[str],
                                               _private_cache_home: Path) -> None:
    assert default_cache_dir() == _private_cache_home / "wasm-scheduler"
    code, origins, _err = _simulate(capsys)
    assert code == 0 and origins == ["compiled"]
    assert len(_entries(_private_cache_home / "wasm-scheduler")) == 1


@pytest.mark.parametrize("command", [["simulate"], ["bench"], ["extender", "--config", "s.yaml"]])
def test_every_guest_loading_command_takes_the_cache_options(command: list[str], tmp_path: Path,
                                                             _private_cache_home: Path) -> None:
    parser = build_parser()
    assert cache_dir_of(parser.parse_args(command)) == _private_cache_home / "wasm-scheduler"
    assert cache_dir_of(parser.parse_args([*command, "--cache-dir", str(tmp_path / "c")])) == tmp_path / "c"
    assert cache_dir_of(parser.parse_args([*command, "--no-cache"])) is None
    with pytest.raises(SystemExit):  # one or the other
        parser.parse_args([*command, "--no-cache", "--cache-dir", str(tmp_path)])


# --- reuse across runs ---------------------------------------------------------------------------


def test_the_second_run_loads_the_guest_from_the_cache(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    folder = tmp_path / "cache"
    first = _simulate(capsys, "--cache-dir", str(folder))
    second = _simulate(capsys, "--cache-dir", str(folder))
    assert first[:2] == (0, ["compiled"])
    assert second[:2] == (0, ["disk"])
    assert len(_entries(folder)) == 1


def test_the_extender_uses_its_cache_dir(tmp_path: Path) -> None:
    folder = tmp_path / "cache"
    options = ExtenderOptions(EXAMPLES / "scheduler-config.yaml", listen="127.0.0.1:0", expect_bind=False,
                              cache_dir=folder)
    origins = []
    for _ in range(2):
        running = RunningExtender(options)
        running.close()
        running.compiler.close()
        origins += [wp.plugin.guest.origin for wp in running.plugins]
    assert origins == ["compiled", "disk"]
    assert len(_entries(folder)) == 1


def test_no_cache_writes_nothing(capsys: pytest.CaptureFixture[str], _private_cache_home: Path) -> None:
    for _ in range(2):
        code, origins, _err = _simulate(capsys, "--no-cache")
        assert code == 0 and origins == ["compiled"]
    assert not _private_cache_home.exists()


# --- sharing, damage, failures -------------------------------------------------------------------

_RACER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from wasm_scheduler.registry.compiler import GuestCompiler
    from wasm_scheduler.registry.config import PluginConfig

    folder, examples, ready, go = (Path(a) for a in sys.argv[1:5])
    config = PluginConfig.from_args("NodeNumber", {"guestURL": "nodenumber/nodenumber.wasm"}, base_dir=examples)
    with GuestCompiler(cache_dir=folder) as compiler:
        ready.touch()
        deadline = time.monotonic() + 60
        while not go.exists() and time.monotonic() < deadline:
            time.sleep(0.001)
        print(compiler.load(config).origin)
""")


def test_two_processes_compiling_into_one_empty_cache_both_succeed(tmp_path: Path) -> None:
    folder, go = tmp_path / "cache", tmp_path / "go"
    ready = [tmp_path / f"ready-{i}" for i in range(2)]
    racers = [subprocess.Popen([sys.executable, "-c", _RACER, str(folder), str(EXAMPLES), str(r), str(go)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in ready]
    try:
        deadline = time.monotonic() + 60
        while not all(r.exists() for r in ready) and time.monotonic() < deadline:
            time.sleep(0.01)
        go.touch()  # both start compiling into the empty folder at the same moment
        results = [racer.communicate(timeout=60) for racer in racers]
    finally:
        for racer in racers:
            racer.kill()
            racer.wait()
    for racer, (out, err) in zip(racers, results, strict=True):
        assert racer.returncode == 0, err
        assert out.splitlines()[-1] in ("compiled", "disk")
    assert len(_entries(folder)) == 1
    assert not [p for p in folder.iterdir() if p.suffix == ".tmp"]  # no temporary file left behind
    assert _load(folder)[0] == "disk"  # what they left is a whole, valid entry


@pytest.mark.parametrize("damage", [
    pytest.param(lambda blob: blob[: len(blob) // 2], id="truncated"),
    pytest.param(lambda blob: b"", id="empty"),
    pytest.param(lambda blob: blob[:-100] + bytes(b ^ 0xFF for b in blob[-100:]), id="flipped-bytes"),
    pytest.param(lambda blob: b"garbage" * 1000, id="garbage"),
])
def test_a_damaged_entry_is_compiled_again_and_rewritten(tmp_path: Path, damage) -> None:
    folder = tmp_path / "cache"
    assert _load(folder)[0] == "compiled"
    [entry] = _entries(folder)
    good = entry.read_bytes()
    entry.write_bytes(damage(good))
    origin, logs = _load(folder)
    assert origin == "compiled"
    assert [e["event"] for e in logs if e["log_level"] == "warning"] == ["guest.cache_corrupt"]
    assert _load(folder)[0] == "disk"  # rewritten whole
    assert entry.read_bytes() != damage(good)


def test_an_entry_is_named_by_guest_wasmtime_version_and_machine(tmp_path: Path) -> None:
    """Another wasmtime version (or machine) sharing the folder never reads this entry: its name differs."""
    folder = tmp_path / "cache"
    _load(folder)
    [entry] = _entries(folder)
    digest = hashlib.sha256((EXAMPLES / "nodenumber" / "nodenumber.wasm").read_bytes()).hexdigest()
    assert entry.name == f"{digest}-wasmtime{version('wasmtime')}-{platform.machine()}.cwasm"


def test_an_entry_wasmtime_refuses_is_compiled_again(tmp_path: Path) -> None:
    """An intact entry made for another engine configuration: wasmtime refuses it, as it refuses
    one of another version; the guest is compiled again."""
    folder = tmp_path / "cache"
    _load(folder)
    config = wasmtime.Config()
    config.epoch_interruption = False  # unlike the runtime's engine
    other = GuestCompiler(cache_dir=folder, engine=wasmtime.Engine(config))
    with structlog.testing.capture_logs() as logs:
        assert other.load(NODENUMBER).origin == "compiled"
    other.close()
    assert [e["event"] for e in logs if e["log_level"] == "warning"] == ["guest.cache_stale"]


def test_an_unwritable_cache_folder_is_a_warning(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    code, origins, err = _simulate(capsys, "--cache-dir", str(blocker / "cache"))
    assert code == 0 and origins == ["compiled"]
    warnings = [json.loads(line) for line in err.splitlines() if '"guest.cache_unwritable"' in line]
    assert len(warnings) == 1 and warnings[0]["level"] == "warning"
    assert blocker.read_text() == "not a folder"

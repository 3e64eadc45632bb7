"""Shared fixtures: a compiler per test session, the probe guest, guests from WAT text."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pykka
import pytest
import structlog

from wasm_scheduler.actors.guest_instance import GuestInstance
from wasm_scheduler.registry.compiler import CompiledGuest, GuestCompiler
from wasm_scheduler.registry.config import PluginConfig
from wasm_scheduler.vocabulary import EmptyHandle

GUESTS = Path(__file__).parent / "guests"
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

#: The checker guest without prebind, bind, postbind and unreserve (a scoring plugin's
#: shape): nothing can call its instance for a pod after the pod's Permit.
SCORER_WAT = "\n".join(
    line for line in (GUESTS / "checker.wat").read_text().splitlines()
    if not any(f'(export "{point}")' in line for point in ("prebind", "bind", "postbind", "unreserve"))
)


@pytest.fixture(scope="session")
def compiler() -> GuestCompiler:
    return GuestCompiler()


@pytest.fixture(autouse=True)
def _private_cache_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """CLI runs cache compiled guests in a private folder, never the user's ~/.cache."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg-cache")))


@pytest.fixture(autouse=True)
def _quiet_logs_and_no_stray_actors() -> Iterator[None]:
    structlog.configure(
        processors=[structlog.processors.add_log_level, structlog.processors.JSONRenderer()],
        wrapper_class=structlog.make_filtering_bound_logger(30),
        cache_logger_on_first_use=False,
    )
    yield
    # Every test stops what it started; a leak here is a bug of the runtime or the test.
    deadline = time.monotonic() + 3  # stops requested without waiting finish quickly
    while pykka.ActorRegistry.get_all() and time.monotonic() < deadline:
        time.sleep(0.01)
    leftover = pykka.ActorRegistry.get_all()
    pykka.ActorRegistry.stop_all()
    assert not leftover, f"actors left running: {leftover}"


def wat_guest(compiler: GuestCompiler, name: str, wat: str) -> CompiledGuest:
    return compiler.compile(name, f"{name}.wat", wat.encode())


@pytest.fixture(scope="session")
def probe(compiler: GuestCompiler) -> CompiledGuest:
    return compiler.compile("probe", str(GUESTS / "probe.wat"), (GUESTS / "probe.wat").read_bytes())


@pytest.fixture
def make_instance(probe: CompiledGuest) -> Callable[..., GuestInstance]:
    def make(guest: CompiledGuest | None = None, **config: object) -> GuestInstance:
        g = guest or probe
        cfg = PluginConfig(name=g.name, guest_url=g.url, **config)  # type: ignore[arg-type]
        return GuestInstance(g, cfg, f"{g.name}-test")

    return make


@pytest.fixture
def handle() -> EmptyHandle:
    return EmptyHandle()

"""Fixtures of the end-to-end suite (`python -m pytest -m e2e tests/e2e`).

Every test here is marked `e2e`, which the fast suite leaves out. The binaries are
built once (cached by go.sum's hash), one control plane serves the whole session, and
each test gets a `Harness` whose processes are stopped after it and whose logs stay in
the artifacts folder (`$E2E_ARTIFACTS`, default `.e2e-artifacts/` in the checkout); a
failing test prints the tail of each log.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.cluster import REPO, Binaries, ControlPlane, Harness, build_binaries

E2E_DIR = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if Path(str(item.fspath)).resolve().is_relative_to(E2E_DIR):
            item.add_marker(pytest.mark.e2e)
            # Each wait inside is bounded on its own; this only stops a test that hangs anyway.
            item.add_marker(pytest.mark.timeout(900))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> object:
    report = yield
    if report.when == "call":  # type: ignore[attr-defined]
        item.stash[_FAILED] = report.failed  # type: ignore[attr-defined]
    return report


_FAILED = pytest.StashKey[bool]()


@pytest.fixture(scope="session")
def artifacts() -> Path:
    base = Path(os.environ.get("E2E_ARTIFACTS", REPO / ".e2e-artifacts"))
    folder = base / time.strftime("%Y%m%d-%H%M%S")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="session")
def binaries() -> Binaries:
    return build_binaries()


@pytest.fixture(scope="session")
def control_plane(binaries: Binaries, artifacts: Path) -> Iterator[ControlPlane]:
    plane = ControlPlane(binaries, artifacts / "control-plane")
    try:
        plane.start()
    except BaseException:
        print(plane.apiserver.tail(60), plane.etcd.tail(20), sep="\n")
        plane.stop()
        raise
    yield plane
    plane.stop()


@pytest.fixture
def harness(request: pytest.FixtureRequest, control_plane: ControlPlane, binaries: Binaries,
            artifacts: Path) -> Iterator[Harness]:
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)[:100]
    running = Harness(control_plane, binaries, artifacts / name)
    try:
        yield running
    finally:
        running.stop_processes()
        if request.node.stash.get(_FAILED, False):
            print(f"\n==== logs of {request.node.name} (kept in {running.folder}) ====\n{running.tails()}")
            print(f"---- kube-apiserver ----\n{control_plane.apiserver.tail(15)}")
        try:
            running.cluster.delete_all()
        except Exception as exc:  # noqa: BLE001 - a broken control plane fails the next test clearly
            print(f"cleanup after {request.node.name} failed: {exc!r}")
        running.cluster.close()

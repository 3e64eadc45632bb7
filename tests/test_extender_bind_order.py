"""Bind in the extender follows the profile's order as kube-scheduler builds it: DefaultBinder
(the extender's Kubernetes API binder) comes before a wasm plugin enabled through multiPoint,
so that plugin's `bind` export is never called unless the profile disables DefaultBinder.

Guests built with the SIG SDK's `plugin.Set` export `bind` whether or not the plugin binds,
and that export answers Success: called first, it would leave every pod unbound."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.test_extender_probe_fixes import RecordingBinder, binding, close_all, pod, whole, write_config
from wasm_scheduler.adapters.extender.command import load_profiles
from wasm_scheduler.adapters.extender.service import ExtenderService, ServedProfile
from wasm_scheduler.adapters.framework.config import load_config
from wasm_scheduler.registry.compiler import GuestCompiler

#: Binds every pod with Success and does nothing else, like an SDK guest whose plugin has no Bind.
SAYS_BOUND = """
(module
  (memory (export "memory") 1)
  (func (export "filter") (result i32) (i32.const 0))
  (func (export "bind") (result i32) (i32.const 0)))
"""


def _profiles(tmp_path: Path, compiler: GuestCompiler, plugins: dict[str, Any]) -> list[ServedProfile]:
    guest = tmp_path / "says-bound.wat"
    guest.write_text(SAYS_BOUND)
    profile = {"schedulerName": "default-scheduler", "plugins": plugins,
               "pluginConfig": [{"name": "SaysBound", "args": {"guestURL": str(guest)}}]}
    return load_profiles(load_config(write_config(tmp_path, [profile])), compiler)


MULTIPOINT = {"multiPoint": {"enabled": [{"name": "SaysBound"}]}}


@pytest.mark.parametrize(("plugins", "binders"), [
    (MULTIPOINT, []),
    # Enabled at bind as well as in multiPoint: kube-scheduler places such an override first.
    ({**MULTIPOINT, "bind": {"enabled": [{"name": "SaysBound"}]}}, ["SaysBound"]),
    ({"filter": {"enabled": [{"name": "SaysBound"}]}, "bind": {"enabled": [{"name": "SaysBound"}]}}, []),
    ({**MULTIPOINT, "bind": {"disabled": [{"name": "DefaultBinder"}]}}, ["SaysBound"]),
    ({**MULTIPOINT, "bind": {"disabled": [{"name": "*"}], "enabled": [{"name": "SaysBound"}]}}, ["SaysBound"]),
    ({"filter": {"enabled": [{"name": "SaysBound"}]}}, []),
])
def test_the_wasm_bind_plugins_are_those_before_any_in_tree_binder(
        tmp_path: Path, compiler: GuestCompiler, plugins: dict[str, Any], binders: list[str]) -> None:
    served = _profiles(tmp_path, compiler, plugins)
    try:
        [profile] = served
        assert profile.framework.names("bind") == binders
        assert profile.framework.names("filter") == ["SaysBound"]
    finally:
        close_all(served)


@pytest.fixture
def default_profile(tmp_path: Path, compiler: GuestCompiler) -> Iterator[list[ServedProfile]]:
    served = _profiles(tmp_path, compiler, MULTIPOINT)
    yield served
    close_all(served)


def test_with_the_default_profile_the_api_binds_though_the_guest_says_bound(
        default_profile: list[ServedProfile]) -> None:
    binder = RecordingBinder()
    with ExtenderService(default_profile, binder=binder) as service:
        p = pod("p-1")
        assert len(service.filter(whole(p, ["node-1", "node-2"]))["Nodes"]["items"]) == 2
        assert service.bind(binding(p, "node-1")) == {"Error": ""}
    assert binder.bound == [("ns/p-1", "node-1")]

"""The plugin's shared wire cache (actors/kube/wire_cache.py): a pod is encoded once per pod
object, whichever thread asks first (the facade, or the instance's host function)."""

from __future__ import annotations

import pytest

from tests.kube_decode import decode_pod
from wasm_scheduler.actors.kube import wire_cache


def pod(name: str) -> dict:
    return {"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"}}


def test_a_pod_is_encoded_once_per_object(monkeypatch: pytest.MonkeyPatch) -> None:
    encoded: list[str] = []
    real = wire_cache.encode_pod

    def counting(obj: dict, **options: object) -> bytes:
        encoded.append(obj["metadata"]["name"])
        return real(obj, **options)  # type: ignore[arg-type]

    monkeypatch.setattr(wire_cache, "encode_pod", counting)
    cache = wire_cache.WireCache()
    a = pod("a")
    first = cache.pod(a)
    assert cache.pod(a) is first and encoded == ["a"]
    assert decode_pod(first)["metadata"]["name"] == "a"
    changed = pod("a") | {"spec": {"nodeName": "node-1"}}  # a new dict for a changed pod
    assert decode_pod(cache.pod(changed))["spec"]["nodeName"] == "node-1"
    assert encoded == ["a", "a"]


def test_the_pods_kept_are_bounded() -> None:
    cache = wire_cache.WireCache()
    pods = [pod(f"p{i}") for i in range(wire_cache.POD_ENTRIES * 3)]
    for p in pods:
        cache.pod(p)
    assert len(cache._pods) == wire_cache.POD_ENTRIES
    assert decode_pod(cache.pod(pods[-1]))["metadata"]["name"] == pods[-1]["metadata"]["name"]

"""Pods encoded with the spec/status cache (`kube.codec.PodPartCache`): the same bytes,
errors and unknown-field reports as without it, whatever came before; repeated parts
are found again, values Python calls equal but that encode differently are not."""

from __future__ import annotations

import copy
import datetime as dt
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.kube_decode import decode_pod
from wasm_scheduler.actors.kube.codec import KubeCodecError, PodPartCache, encode_pod
from wasm_scheduler.actors.kube.wire_cache import WireCache

_HERE = Path(__file__).resolve().parent


def _real_pod() -> dict[str, Any]:
    local = _HERE / "data" / "pod-real.yaml"
    path = local if local.exists() else _HERE.parents[1] / "shared" / "testdata" / "pod-real.yaml"
    pod: dict[str, Any] = yaml.safe_load(path.read_text())
    return pod


def template_pod(name: str, cpu: Any = "100m", links: Any = True, grace: Any = 30, phase: Any = "Pending",
                 extra: dict[str, Any] | None = None, meta: dict[str, Any] | None = None,
                 reverse_meta: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.9",
                        "resources": {"requests": {"cpu": cpu}}}],
        "enableServiceLinks": links,
        "terminationGracePeriodSeconds": grace,
        **(extra or {}),
    }
    metadata = {"name": name, "namespace": "default", "uid": f"uid-{name}", **(meta or {})}
    if reverse_meta:
        metadata = dict(reversed(metadata.items()))
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec, "status": {"phase": phase}}


def outcome(pod: dict[str, Any], parts: PodPartCache | None) -> tuple[str, Any, list[str]]:
    """("ok", bytes, unknown paths) or ("error", message, [])."""
    unknown: list[str] = []
    try:
        return "ok", encode_pod(pod, unknown_fields=unknown, parts=parts), unknown
    except KubeCodecError as exc:
        return "error", str(exc), []


def test_pods_of_one_template_share_their_parts() -> None:
    cache = PodPartCache()
    pods = [template_pod(f"web-{i}") for i in range(5)]
    encoded = [encode_pod(p, parts=cache) for p in pods]
    assert encoded == [encode_pod(p) for p in pods]
    assert cache.hits == 2 * 4  # spec and status of every pod after the first
    assert [decode_pod(data)["metadata"]["name"] for data in encoded] == [f"web-{i}" for i in range(5)]


def test_the_realistic_pod_and_a_sibling_encode_as_without_the_cache() -> None:
    real = _real_pod()
    sibling = copy.deepcopy(real)
    sibling["metadata"]["name"] += "-2"
    sibling["metadata"]["uid"] = "another-uid"
    cache = PodPartCache()
    assert encode_pod(real, parts=cache) == encode_pod(real)
    assert encode_pod(sibling, parts=cache) == encode_pod(sibling)
    assert cache.hits == 2


@pytest.mark.parametrize(("first", "second"), [
    ({"cpu": 1}, {"cpu": 1.0}),        # a quantity keeps its text: "1" and "1.0"
    ({"cpu": 1.0}, {"cpu": 1}),
    ({"grace": 30}, {"grace": 30.0}),  # the same int64, a different key: encoded again, same bytes
])
def test_values_python_calls_equal_are_not_taken_for_each_other(first: dict[str, Any],
                                                                 second: dict[str, Any]) -> None:
    a, b = template_pod("a", **first), template_pod("b", **second)
    assert a["spec"] == b["spec"]  # what a dict comparison would have taken as a hit
    cache = PodPartCache()
    encode_pod(a, parts=cache)
    assert encode_pod(b, parts=cache) == encode_pod(b)
    assert cache.hits == 1  # status only


def test_a_wrong_type_equal_to_a_cached_value_is_still_an_error() -> None:
    cache = PodPartCache()
    encode_pod(template_pod("a", links=True), parts=cache)
    with pytest.raises(KubeCodecError, match=r"spec\.enableServiceLinks: expected a boolean"):
        encode_pod(template_pod("b", links=1), parts=cache)  # 1 == True in Python
    with pytest.raises(KubeCodecError, match=r"status\.phase"):
        encode_pod(template_pod("c", phase=1), parts=cache)


def test_a_part_that_fails_is_not_kept() -> None:
    cache = PodPartCache()
    for name in ("a", "b"):
        with pytest.raises(KubeCodecError, match=r"spec\.containers\[0\]\.resources\.requests\.cpu"):
            encode_pod(template_pod(name, cpu="lots"), parts=cache)
    # The second pod failed too: its spec was encoded again, not served from the cache.
    assert cache.hits == 0 and not cache._entries["spec"]


def test_unknown_fields_of_a_cached_part_are_reported_every_time() -> None:
    cache = PodPartCache()
    reports = []
    for name in ("a", "b"):
        unknown: list[str] = []
        encode_pod(template_pod(name, extra={"futureField": 1}), unknown_fields=unknown, parts=cache)
        reports.append(unknown)
    assert reports == [["spec.futureField"], ["spec.futureField"]] and cache.hits == 2


def test_values_marshal_cannot_write_are_encoded_every_time() -> None:
    cache = PodPartCache()
    pods = [template_pod(n) for n in ("a", "b")]
    for pod in pods:
        pod["status"]["startTime"] = dt.datetime(2024, 5, 1, 12, 0, tzinfo=dt.UTC)  # what YAML makes of a time
    assert [encode_pod(p, parts=cache) for p in pods] == [encode_pod(p) for p in pods]
    assert cache.hits == 1  # the spec; the status with a datetime has no key


def test_a_field_rests_after_many_misses_and_comes_back() -> None:
    cache = PodPartCache()
    for i in range(PodPartCache.MISSES_TO_REST):  # every spec different
        encode_pod(template_pod(f"p{i}", grace=i), parts=cache)
    hits = cache.hits
    encode_pod(template_pod("again", grace=0), parts=cache)  # a repeat, but the spec rests
    assert cache.hits == hits + 1  # the status only
    for i in range(PodPartCache.REST):
        encode_pod(template_pod(f"q{i}", grace=1000 + i), parts=cache)
    hits = cache.hits
    encode_pod(template_pod("back", grace=1000 + PodPartCache.REST - 1), parts=cache)
    assert cache.hits == hits + 2  # spec and status found again


def test_a_rest_counter_a_race_took_below_zero_does_not_stop_the_cache() -> None:
    cache = PodPartCache()
    cache._resting["spec"] = -1  # two threads counted the last resting pod down at once
    for name in ("a", "b"):
        encode_pod(template_pod(name), parts=cache)
    assert cache.hits == 2  # spec and status of "b"


def test_threads_sharing_one_cache_get_what_encode_pod_gives() -> None:
    cache = PodPartCache()
    pods = [template_pod(f"p{i}", grace=i % 5, phase=("Pending", "Running")[i % 2]) for i in range(400)]
    expected = [encode_pod(p) for p in pods]
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda p: encode_pod(p, parts=cache), pods))
    assert got == expected and cache.hits > 0


def test_the_cache_is_bounded() -> None:
    cache = PodPartCache()
    for i in range(PodPartCache.ENTRIES * 3):
        pod = template_pod(f"p{i}", grace=i)
        assert encode_pod(pod, parts=cache) == encode_pod(pod)
        if i % 8 == 0:
            encode_pod(template_pod("repeat", grace=i), parts=cache)  # a hit keeps the field awake
    assert all(len(entries) <= PodPartCache.ENTRIES for entries in cache._entries.values())


def test_the_wire_cache_encodes_through_its_part_cache() -> None:
    wire = WireCache()
    first, second = template_pod("a"), template_pod("b")
    assert wire.pod(first) == encode_pod(first) and wire.pod(second) == encode_pod(second)
    assert wire.pod_parts.hits == 2


# --- any sequence of pods: with the cache, exactly what encode_pod gives without it ------

_CHOICES: dict[str, list[Any]] = {
    "cpu": [1, 1.0, "1", "100m", True, 0.5, "lots"],
    "links": [True, False, 1, 0, "yes"],
    "grace": [30, 30.0, "30", True, 2**70, None],
    "phase": ["Pending", "Running", 1, None],
    "extra": [{}, {"futureField": 1}, {"nodeName": "node-1"}, {"priority": True}],
    "meta": [
        {}, {"labels": {"app": "web", "tier": "front"}}, {"labels": {"app": 1}}, {"generation": 3},
        {"creationTimestamp": "2024-05-01T00:00:00Z"}, {"futureMeta": 1}, {"uid": 7}, {"namespace": "\ud800"},
        {"generateName": "", "resourceVersion": "42"}, {"annotations": {"a": "b"}, "finalizers": ["f"]},
        {"finalizers": ["f"], "generation": 2, "labels": {"app": "web"}, "deletionGracePeriodSeconds": 30},
        {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u",
                              "controller": True}]},
    ],
    "reverse_meta": [False, True],
}


@st.composite
def pod_sequences(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Pods where each differs from the last in at most one field (so near-equal specs meet)."""
    fields = {key: draw(st.sampled_from(values)) for key, values in _CHOICES.items()}
    order = draw(st.permutations(["apiVersion", "kind", "metadata", "spec", "status"]))
    pods = []
    for i in range(draw(st.integers(1, 40))):  # long enough to rest a part and to evict
        key = draw(st.sampled_from([None, "order", *_CHOICES]))
        if key == "order":
            order = draw(st.permutations(order))
        elif key is not None:
            fields[key] = draw(st.sampled_from(_CHOICES[key]))
        pod = template_pod(f"p{i}", **copy.deepcopy(fields))
        pods.append({k: pod[k] for k in order})
    return pods


@settings(max_examples=200, deadline=None)
@given(pod_sequences())
def test_any_sequence_of_pods_encodes_as_without_the_cache(pods: list[dict[str, Any]]) -> None:
    cache = PodPartCache()
    for pod in pods:
        assert outcome(pod, cache) == outcome(pod, None)

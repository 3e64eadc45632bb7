"""The extender as an unmodified kube-scheduler calls it, against a real API server.

Each test starts `wasm-scheduler extender` and kube-scheduler (built from Kubernetes
1.33's own modules) beside the session's etcd and kube-apiserver, creates Nodes and
Pods through the API, and checks what the real scheduler did: where each pod was
bound and by whom, what the extender's JSON log says about each pod's instance, and
that no instance is left held.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from tests.e2e.cluster import (
    GUESTS,
    NODENUMBER_WASM,
    ExtenderEntry,
    ExtenderProcess,
    Harness,
    node_object,
    pod_object,
    wasm_plugin_config,
)
from tests.e2e.process import wait_for
from wasm_scheduler.adapters.trace import read_trace


def digit_of(name: str) -> str:
    found = re.search(r"(\d)$", name)
    assert found, name
    return found.group(1)


def start(harness: Harness, extender_args: Sequence[str] = (), entry: dict[str, Any] | None = None,
          plugins: dict[str, Any] | None = None) -> tuple[ExtenderProcess, ExtenderEntry]:
    """The extender serving `plugins` (by default NodeNumber, and the checker guest, which
    traps when a call of a pod's cycle reaches an instance its PreFilter did not run on),
    and kube-scheduler pointed at it."""
    plugins = plugins if plugins is not None else {"NodeNumber": NODENUMBER_WASM, "Checker": GUESTS / "checker.wat"}
    extender = harness.extender(wasm_plugin_config(plugins), *extender_args).start()
    extender_entry = ExtenderEntry(url_prefix=extender.url, **(entry or {}))
    harness.kube_scheduler([extender_entry]).start()
    return extender, extender_entry


def instances_by_pod(extender: ExtenderProcess, plugin: str) -> dict[str, dict[str, set[str]]]:
    """Pod name -> extension point -> the instances of `plugin` that served it (from the JSON log)."""
    served: dict[str, dict[str, set[str]]] = {}
    for record in extender.log_records():
        if record.get("event") == "call.finished" and record.get("plugin") == plugin:
            pod = str(record.get("pod", "")).rpartition("/")[2]
            point = str(record.get("extension_point", ""))
            served.setdefault(pod, {}).setdefault(point, set()).add(str(record.get("instance", "")))
    return served


def test_filter_prioritize_bind_whole_nodes(harness: Harness) -> None:
    """Case 1: 200 pods land where NodeNumber's score says; each pod's scheduling and
    binding cycle ran on one instance; the Binding was created by the extender."""
    harness.cluster.create_nodes(node_object(f"node-{i}") for i in range(10))
    extender, _entry = start(harness)
    names = harness.cluster.create_pods(pod_object(f"pod-{i}") for i in range(200))
    bound = harness.cluster.wait_bound(names, timeout_s=240)

    wrong = {pod: node for pod, node in bound.items() if digit_of(pod) != digit_of(node)}
    assert not wrong, f"placed against NodeNumber's score: {sorted(wrong.items())[:10]}"

    trace = read_trace(extender.log_lines())
    assert not trace.problems, trace.problems
    for plugin in ("NodeNumber", "Checker"):
        served = instances_by_pod(extender, plugin)
        for pod in names:
            points = served.get(pod)
            assert points, f"{plugin} never served {pod}"
            instances = set().union(*points.values())
            assert len(instances) == 1, f"{pod} on {plugin}: calls reached {points}"
        if plugin == "Checker":
            for pod in names:
                assert {"prefilter", "filter", "score", "reserve", "permit", "prebind", "postbind"} <= \
                    served[pod].keys(), (pod, sorted(served[pod]))
                # The extender's API binder stands where DefaultBinder does, first: no guest's Bind runs.
                assert "bind" not in served[pod], (pod, sorted(served[pod]))
    assert not [r for r in extender.log_records() if r.get("event") == "call.trapped"]
    # The extender created each Binding: kube-scheduler logged no bind of its own.
    created = [str(r.get("pod")) for r in extender.log_records() if r.get("event") == "bind.api_created"]
    assert sorted(created) == sorted(f"default/{n}" for n in names)
    assert not trace.open_cycles, trace.open_cycles[:5]


def verbs_served(extender: ExtenderProcess) -> dict[str, int]:
    """How many requests of each verb the extender answered."""
    counts: dict[str, int] = {}
    for record in extender.log_records():
        if record.get("event") == "extender.request":
            verb = str(record.get("verb", ""))
            counts[verb] = counts.get(verb, 0) + 1
    return counts


def test_one_feasible_node_binds_without_prioritize(harness: Harness) -> None:
    """Case 3: kube-scheduler skips prioritize when one node is feasible; the guest's
    Reserve..PostBind still run, on the pod's instance, before the Binding."""
    harness.cluster.create_nodes([node_object("node-3", labels={"pool": "only"}),
                                  *(node_object(f"node-{i}") for i in (1, 2, 4))])
    extender, _entry = start(harness)
    names = harness.cluster.create_pods(pod_object(f"single-{i}", extra_spec={"nodeSelector": {"pool": "only"}})
                                        for i in range(5))
    bound = harness.cluster.wait_bound(names, timeout_s=120)
    assert set(bound.values()) == {"node-3"}
    assert "prioritize" not in verbs_served(extender), verbs_served(extender)
    served = instances_by_pod(extender, "Checker")
    for pod in names:
        assert {"prefilter", "filter", "reserve", "permit", "prebind", "postbind"} <= served[pod].keys()
        assert "score" not in served[pod] and "bind" not in served[pod]
        assert len(set().union(*served[pod].values())) == 1, served[pod]
    created = sorted(str(r.get("pod")) for r in extender.log_records() if r.get("event") == "bind.api_created")
    assert created == sorted(f"default/{n}" for n in names)
    assert not read_trace(extender.log_lines()).open_cycles


def test_no_bind_verb_kube_scheduler_binds_and_nothing_is_held(harness: Harness) -> None:
    """Case 4: without a bindVerb kube-scheduler binds; the extender (--no-bind) holds
    no instance for a bind that never comes: at most each plugin's scheduling slot."""
    harness.cluster.create_nodes(node_object(f"node-{i}") for i in range(10))
    extender, _entry = start(harness, ["--no-bind", "--bind-timeout", "5"], entry={"bind_verb": ""})
    names = harness.cluster.create_pods(pod_object(f"nobind-{i}") for i in range(40))
    bound = harness.cluster.wait_bound(names, timeout_s=120)
    assert all(digit_of(pod) == digit_of(node) for pod, node in bound.items())
    assert "bind" not in verbs_served(extender)
    records = extender.log_records()
    assert not [r for r in records if r.get("event") in ("bind.api_created", "assignment.bind_timeout")]
    trace = read_trace(extender.log_lines())
    open_by_plugin: dict[str, int] = {}
    for _uid, plugin, _instance, _where in trace.open_cycles:
        open_by_plugin[plugin] = open_by_plugin.get(plugin, 0) + 1
    # The last pod's instance stays in the slot until the next PreFilter: nothing else is held.
    assert all(count <= 1 for count in open_by_plugin.values()), trace.open_cycles
    started = {r.get("plugin"): r for r in records if r.get("event") == "instance.started"}
    assert started, "no instance.started in the log"


def test_preemption_whole_pods(harness: Harness) -> None:
    """Case 5 (nodeCacheCapable false: victims as whole pods): a high-priority pod
    preempts a low-priority one; the extender's guest is consulted in preempt; the victim
    is deleted by kube-scheduler and the preemptor bound."""
    cluster = harness.cluster
    cluster.create_priority_class("e2e-low", 10)
    cluster.create_priority_class("e2e-high", 1000)
    try:
        cluster.create_nodes([node_object("node-1", cpu="1")])
        extender, _entry = start(harness)
        cluster.create_pods([pod_object("low-1", cpu="800m", priority_class="e2e-low")])
        cluster.wait_bound(["low-1"], timeout_s=60)
        cluster.create_pods([pod_object("high-1", cpu="500m", priority_class="e2e-high")])
        bound = cluster.wait_bound(["high-1"], timeout_s=120)
        assert bound["high-1"] == "node-1"
        assert cluster.pod("low-1") is None, "the victim was not deleted"
        assert verbs_served(extender).get("preempt", 0) >= 1, verbs_served(extender)
        served = instances_by_pod(extender, "Checker")["high-1"]
        assert "removepod" in served and "filter" in served, sorted(served)
    finally:
        for name in ("e2e-low", "e2e-high"):
            cluster.scheduling.delete_priority_class(name)


def test_mutual_tls(harness: Harness) -> None:
    """Case 6: kube-scheduler reaches the extender over HTTPS with a client certificate
    (`tlsConfig`); a client without a certificate is refused in the handshake."""
    import socket
    import ssl

    pki = harness.control_plane.pki
    server = pki.issue("extender-serving", "wasm-scheduler-extender", server_names=("127.0.0.1", "localhost"))
    client = pki.issue("scheduler-client", "kube-scheduler", client=True)
    harness.cluster.create_nodes(node_object(f"node-{i}") for i in range(10))
    extender = harness.extender(
        wasm_plugin_config({"NodeNumber": NODENUMBER_WASM}),
        "--tls-cert", str(server.cert), "--tls-key", str(server.key), "--client-ca", str(pki.ca),
        scheme="https").start()
    entry = ExtenderEntry(url_prefix=extender.url,
                          tls={"caFile": str(pki.ca), "certFile": str(client.cert), "keyFile": str(client.key)})
    harness.kube_scheduler([entry]).start()
    names = harness.cluster.create_pods(pod_object(f"tls-{i}") for i in range(8))
    bound = harness.cluster.wait_bound(names, timeout_s=120)
    assert all(digit_of(pod) == digit_of(node) for pod, node in bound.items())

    anonymous = ssl.create_default_context(cafile=str(pki.ca))
    refused = False
    with socket.create_connection(("127.0.0.1", extender.port), timeout=10) as raw:
        try:
            with anonymous.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                tls.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                refused = tls.recv(100) == b""
        except (ssl.SSLError, ConnectionResetError, BrokenPipeError):
            refused = True
    assert refused, "a client without a certificate was served"


def test_managed_resources_and_ignorable(harness: Harness) -> None:
    """Case 8: with `managedResources`, kube-scheduler calls the extender only for pods
    that request a managed resource (ignoredByScheduler: its own fit check skips it);
    others are scheduled and bound by kube-scheduler alone. With `ignorable: true` a
    dead extender does not stop scheduling."""
    cluster = harness.cluster
    cluster.create_nodes(node_object(f"node-{i}") for i in range(10))
    extender, _entry = start(harness, entry={
        "managed_resources": [{"name": "example.com/widget", "ignoredByScheduler": True}]})
    widget = {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10", "resources": {
        "requests": {"cpu": "10m", "example.com/widget": "1"}, "limits": {"example.com/widget": "1"}}}]}
    managed = cluster.create_pods(pod_object(f"widget-{i}", extra_spec=widget) for i in range(4))
    plain = cluster.create_pods(pod_object(f"plain-{i}") for i in range(4))
    bound = cluster.wait_bound(managed + plain, timeout_s=120)
    assert all(digit_of(pod) == digit_of(bound[pod]) for pod in managed)
    served = instances_by_pod(extender, "NodeNumber")
    assert set(managed) <= served.keys()
    assert not set(plain) & served.keys(), "the extender was called for pods without a managed resource"
    created = {str(r.get("pod")) for r in extender.log_records() if r.get("event") == "bind.api_created"}
    assert created == {f"default/{n}" for n in managed}


def test_ignorable_extender_down(harness: Harness) -> None:
    """Case 8: an ignorable extender that is down is skipped; a non-ignorable one keeps
    pods pending with the error in their FailedScheduling event."""
    from tests.e2e.process import free_port

    cluster = harness.cluster
    cluster.create_nodes(node_object(f"node-{i}") for i in range(3))
    dead = f"http://127.0.0.1:{free_port()}"
    harness.kube_scheduler([ExtenderEntry(url_prefix=dead, ignorable=True, http_timeout="2s")]).start()
    names = cluster.create_pods(pod_object(f"ignored-{i}") for i in range(3))
    cluster.wait_bound(names, timeout_s=120)
    harness.stop_processes()

    harness.kube_scheduler([ExtenderEntry(url_prefix=dead, ignorable=False, http_timeout="2s")],
                           name="kube-scheduler-strict").start()
    cluster.create_pods([pod_object("stuck-1")])

    def failed_event() -> bool:
        return any(e.get("reason") == "FailedScheduling" and e["involvedObject"]["name"] == "stuck-1"
                   for e in cluster.events())

    wait_for(failed_event, 60, "a FailedScheduling event for stuck-1")
    assert not (cluster.pod("stuck-1") or {}).get("spec", {}).get("nodeName")

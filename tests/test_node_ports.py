"""NodePorts: host ports of the pod against those held on the node, as kube-scheduler 1.33 has them."""

from __future__ import annotations

from typing import Any

import pytest

from tests.framework_support import cluster, config, node, pod, run
from wasm_scheduler.adapters.framework.cycle_state import CycleState
from wasm_scheduler.adapters.framework.plugins.node_ports import ERR_REASON, HostPort, NodePorts, host_ports
from wasm_scheduler.adapters.framework.pods import PodInfo
from wasm_scheduler.adapters.framework.resources import Resources
from wasm_scheduler.adapters.framework.results import PodStatus
from wasm_scheduler.adapters.framework.snapshot import NodeInfo
from wasm_scheduler.framework_api import Code


def ported(name: str, *ports: str, node_name: str = "", **kwargs: Any) -> dict[str, Any]:
    """node_ports_test.go's newPod: each port "PROTOCOL/hostIP/hostPort" on one container."""
    body = pod(name, node_name=node_name, **kwargs)
    body["spec"]["containers"][0]["ports"] = [
        {"protocol": protocol, "hostIP": ip, "hostPort": int(port)}
        for protocol, ip, port in (p.split("/") for p in ports)]
    return body


def info(*pods: dict[str, Any], name: str = "m1") -> NodeInfo:
    n = node(name)
    return NodeInfo.of(n, Resources.from_list(n["status"]["allocatable"]), [PodInfo.of(p) for p in pods])


# pkg/scheduler/framework/plugins/nodeports/node_ports_test.go, TestNodePorts: (name, the pod's
# ports, the ports of the pod on the node, whether Filter rejects the node).
NODE_PORTS_CASES = [
    ("other port", ["UDP/127.0.0.1/8080"], ["UDP/127.0.0.1/9090"], False),
    ("same udp port", ["UDP/127.0.0.1/8080"], ["UDP/127.0.0.1/8080"], True),
    ("same tcp port", ["TCP/127.0.0.1/8080"], ["TCP/127.0.0.1/8080"], True),
    ("different host ip", ["TCP/127.0.0.1/8080"], ["TCP/127.0.0.2/8080"], False),
    ("different protocol", ["UDP/127.0.0.1/8080"], ["TCP/127.0.0.1/8080"], False),
    ("second udp port conflict", ["UDP/127.0.0.1/8000", "UDP/127.0.0.1/8080"], ["UDP/127.0.0.1/8080"], True),
    ("first tcp port conflict", ["TCP/127.0.0.1/8001", "UDP/127.0.0.1/8080"],
     ["TCP/127.0.0.1/8001", "UDP/127.0.0.1/8081"], True),
    ("first tcp port conflict due to 0.0.0.0 hostIP", ["TCP/0.0.0.0/8001"], ["TCP/127.0.0.1/8001"], True),
    ("TCP hostPort conflict due to 0.0.0.0 hostIP", ["TCP/10.0.10.10/8001", "TCP/0.0.0.0/8001"],
     ["TCP/127.0.0.1/8001"], True),
    ("second tcp port conflict to 0.0.0.0 hostIP", ["TCP/127.0.0.1/8001"], ["TCP/0.0.0.0/8001"], True),
    ("second different protocol", ["UDP/127.0.0.1/8001"], ["TCP/0.0.0.0/8001"], False),
    ("UDP hostPort conflict due to 0.0.0.0 hostIP", ["UDP/127.0.0.1/8001"], ["TCP/0.0.0.0/8001", "UDP/0.0.0.0/8001"],
     True),
]


@pytest.mark.parametrize(("name", "wanted", "held", "rejected"), NODE_PORTS_CASES, ids=[c[0] for c in NODE_PORTS_CASES])
def test_node_ports(name, wanted, held, rejected):
    """node_ports_test.go, TestNodePorts (every case but "skip filter", below)."""
    plugin, state = NodePorts(), CycleState()
    p = ported("p", *wanted)
    assert plugin.pre_filter(state, p).status.ok
    status = plugin.filter(state, p, info(ported("running", *held, node_name="m1")))
    if rejected:
        assert (status.code, status.reason, status.plugin) == (Code.UNSCHEDULABLE, ERR_REASON, "NodePorts")
    else:
        assert status.ok


def test_node_ports_skip_filter():
    """node_ports_test.go, TestNodePorts: "skip filter": a pod without ports -> PreFilter Skip."""
    assert NodePorts().pre_filter(CycleState(), pod("p")).status.code == Code.SKIP
    no_host_port = pod("p")
    no_host_port["spec"]["containers"][0]["ports"] = [{"containerPort": 80}, {"containerPort": 81, "hostPort": 0}]
    assert NodePorts().pre_filter(CycleState(), no_host_port).status.code == Code.SKIP


def test_host_ports_of_two_pods():
    """node_ports_test.go, TestGetContainerPorts: ports without a host port are left out (here
    `host_ports`, kube's util.GetHostPorts, of each pod in turn; the ports are sanitized)."""
    def containers(*groups: list[tuple[int, int | None]]) -> dict[str, Any]:
        body = pod("p")
        body["spec"]["containers"] = [
            {"name": f"c{i}", "image": "x", "ports": [
                {"containerPort": c, "protocol": "TCP", **({"hostPort": h} if h else {})} for c, h in group]}
            for i, group in enumerate(groups)]
        return body

    pod1 = containers([(8001, 8001), (8002, 8002)], [(8003, 8003), (8004, 8004)], [(8005, None)])
    pod2 = containers([(8011, 8011), (8012, 8012)], [(8013, 8013), (8014, 8014)], [(8015, None)])
    ports = [*host_ports(pod1), *host_ports(pod2)]
    assert ports == [HostPort("0.0.0.0", "TCP", port) for port in (8001, 8002, 8003, 8004, 8011, 8012, 8013, 8014)]


def test_host_ports_count_sidecars_but_not_init_containers():
    """pkg/scheduler/util GetHostPorts: init containers with restartPolicy Always, then the
    containers (a case written here from the function, not ported from a test)."""
    p = ported("p", "TCP//80")
    p["spec"]["initContainers"] = [
        {"name": "setup", "image": "x", "ports": [{"hostPort": 9000}]},
        {"name": "proxy", "image": "x", "restartPolicy": "Always", "ports": [{"hostPort": 9001, "protocol": "UDP"}]},
    ]
    assert host_ports(p) == (HostPort("0.0.0.0", "UDP", 9001), HostPort("0.0.0.0", "TCP", 80))
    holder = info(p)
    plugin = NodePorts()
    assert plugin.used(holder).exact == {("0.0.0.0", "UDP", 9001), ("0.0.0.0", "TCP", 80)}
    assert plugin.filter(CycleState(), ported("q", "TCP/10.0.0.1/9000"), holder).ok  # the init container's is free
    assert not plugin.filter(CycleState(), ported("q", "UDP/10.0.0.1/9001"), holder).ok


def test_empty_protocol_is_tcp_and_empty_ip_the_wildcard():
    held = info(ported("running", "//8080", node_name="m1"))
    plugin = NodePorts()
    assert not plugin.filter(CycleState(), ported("p", "TCP/10.1.1.1/8080"), held).ok
    assert plugin.filter(CycleState(), ported("p", "UDP/10.1.1.1/8080"), held).ok
    assert plugin.filter(CycleState(), ported("p", "TCP/10.1.1.1/8081"), held).ok


def test_used_ports_are_read_again_when_the_nodes_pods_change():
    plugin = NodePorts()
    empty = info()
    want = ported("p", "TCP/0.0.0.0/80")
    assert plugin.filter(CycleState(), want, empty).ok
    taken = empty.with_pod(PodInfo.of(ported("r", "TCP/1.2.3.4/80", node_name="m1")))
    assert not plugin.filter(CycleState(), want, taken).ok
    freed = taken.without_pod(taken.pods[0].uid)
    assert plugin.filter(CycleState(), want, freed).ok


def test_simulate_spreads_pods_that_want_the_same_host_port(compiler):
    pods = [ported(f"web-{i}", "TCP//8080") for i in range(3)]
    report = run(config(), cluster(node("n1"), node("n2"), *pods), compiler)
    placed = [report.outcome(f"default/web-{i}") for i in range(3)]
    assert sorted(o.node for o in placed[:2] if o and o.node) == ["n1", "n2"]
    third = placed[2]
    assert third is not None and third.status == PodStatus.UNSCHEDULABLE
    assert third.reason.startswith("0/2 nodes are available: 2 node(s) didn't have free ports for the requested "
                                   "pod ports (NodePorts).")


def test_preemption_frees_a_host_port(compiler):
    low = ported("low", "TCP//8080", node_name="n1", priority=1)
    high = ported("high", "TCP//8080", priority=1000)
    report = run(config(), cluster(node("n1"), low, high), compiler)
    assert report.outcome("default/high").node == "n1"
    assert [(p.victim, p.node) for p in report.preemptions] == [("default/low", "n1")]

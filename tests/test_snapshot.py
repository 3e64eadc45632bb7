"""Cluster snapshots: quantities, requests, loading files, the cache and its views."""

from __future__ import annotations

from decimal import Decimal

import pytest

from tests.framework_support import cluster, node, pod
from wasm_scheduler.adapters.framework import UserError, cluster_from_objects, load_cluster
from wasm_scheduler.adapters.framework.pods import PodInfo
from wasm_scheduler.adapters.framework.resources import (
    DEFAULT_MEMORY_REQUEST,
    QuantityError,
    Resources,
    parse_quantity,
    pod_requests,
    quantity_value,
)
from wasm_scheduler.adapters.framework.snapshot import node_tree_order


@pytest.mark.parametrize(("text", "value"), [
    ("1", Decimal(1)), ("250m", Decimal("0.25")), ("1.5Gi", Decimal(1.5 * 2**30)), ("2e3", Decimal(2000)),
    ("128974848", Decimal(128974848)), ("129M", Decimal(129_000_000)), ("123Mi", Decimal(123 * 2**20)),
    (0.5, Decimal("0.5")), (3, Decimal(3)), ("1k", Decimal(1000)), ("1E2", Decimal(100)),
])
def test_quantities(text, value):
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["", "abc", "1x", "1.2.3", "--1", True, None, [1]])
def test_bad_quantities(text):
    with pytest.raises(QuantityError):
        parse_quantity(text)


def test_cpu_is_counted_in_millicores_and_rounded_up():
    assert quantity_value("cpu", "1.5") == 1500
    assert quantity_value("cpu", "0.0001") == 1  # Kubernetes rounds up to 1m
    assert quantity_value("memory", "1Ki") == 1024


def test_pod_requests_sum_containers_take_the_init_peak_and_add_overhead():
    p = {"metadata": {"name": "p"}, "spec": {
        "initContainers": [
            {"name": "setup", "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}},
            {"name": "sidecar", "restartPolicy": "Always", "resources": {"requests": {"cpu": "100m"}}},
        ],
        "containers": [
            {"name": "a", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}},
            {"name": "b", "resources": {"limits": {"cpu": "250m", "memory": "512Mi", "example.com/dongle": "1"}}},
        ],
        "overhead": {"cpu": "10m"},
    }}
    requests = pod_requests(p)
    # containers 750m + sidecar 100m = 850m < init setup 2000m: the peak wins; +10m overhead.
    assert requests.requested.milli_cpu == 2010
    assert requests.requested.memory == 1536 * 2**20
    assert requests.requested.scalar == {"example.com/dongle": 1}


def test_pods_that_ask_for_nothing_count_as_small_pods_when_scoring():
    requests = pod_requests({"spec": {"containers": [{"name": "c"}]}})
    assert requests.requested.is_zero
    assert requests.non_zero.milli_cpu == 100 and requests.non_zero.memory == DEFAULT_MEMORY_REQUEST


def test_a_kubectl_list_with_running_and_pending_pods():
    cl = cluster(node("n1", cpu="4"), pod("running", cpu="1", node_name="n1"), pod("pending"),
                 pod("done", node_name="n1") | {"status": {"phase": "Succeeded"}})
    assert [p.key for p in cl.pending] == ["default/pending"]
    assert [p.key for p in cl.running] == ["default/running"]
    (n1,) = cl.nodes
    assert n1.requested.milli_cpu == 1000 and len(n1.pods) == 1
    assert cl.pending[0].uid  # filled in when missing, stable
    assert cluster(node("n1"), pod("pending")).pending[0].uid == cl.pending[0].uid


def test_several_documents_node_lists_and_priority_classes(tmp_path):
    path = tmp_path / "cluster.yaml"
    path.write_text("""
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: gold}
value: 5000
---
apiVersion: v1
kind: NodeList
items:
- metadata: {name: n1}
  status: {allocatable: {cpu: "2", memory: 4Gi, pods: "10"}}
---
apiVersion: v1
kind: Pod
metadata: {name: vip, namespace: prod}
spec:
  priorityClassName: gold
  containers: [{name: c, image: nginx}]
---
apiVersion: v1
kind: Pod
metadata: {name: critical}
spec:
  priorityClassName: system-cluster-critical
  containers: [{name: c, image: nginx}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: ignored}
""")
    cl = load_cluster(path)
    assert [n.name for n in cl.nodes] == ["n1"]
    assert [(p.key, p.priority) for p in cl.pending] == [("prod/vip", 5000), ("default/critical", 2000000000)]
    assert cl.find_pending("vip") is not None and cl.find_pending("prod/vip") is not None
    assert cl.find_pending("nope") is None


@pytest.mark.parametrize(("text", "message"), [
    ("a: [1\n", "invalid YAML at line 2"),
    ("- 1\n", "document 1: expected a Kubernetes object, got list"),
    ("kind: Node\nmetadata: {}\n", "Node at document 1: metadata.name: missing"),
    ("metadata: {name: x}\n", "document 1: kind: missing"),
    ("kind: ConfigMap\nmetadata: {name: x}\n", "no Node or Pod objects (found ConfigMap)"),
    ("kind: Node\nmetadata: {name: n}\nstatus: {allocatable: {cpu: lots}}\n",
     "Node n: status.allocatable.cpu: 'lots' is not a quantity"),
    ("kind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, resources: {requests: {memory: 1Q}}}]}\n",
     "Pod default/p: spec.containers[0].resources: memory: '1Q' has an unknown suffix 'Q'"),
    ("kind: Pod\nmetadata: {name: p}\nspec: {priorityClassName: gold, containers: [{name: c}]}\n",
     "Pod default/p: spec.priorityClassName: no PriorityClass 'gold'"),
    ("kind: Pod\nmetadata: {name: p}\nspec: {}\n", "Pod default/p: spec.containers: expected a non-empty list"),
    ("kind: Node\nmetadata: {name: n}\n---\nkind: Node\nmetadata: {name: n}\n",
     "Node n: metadata.name: a second node of that name"),
])
def test_mistakes_name_the_file_the_object_and_the_field(tmp_path, text, message):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(UserError) as info:
        load_cluster(path)
    assert str(info.value).startswith(f"{path}: ")
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_a_missing_file_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="no such cluster file"):
        load_cluster(tmp_path / "missing.yaml")


def test_nodes_are_listed_zone_by_zone_like_kube_schedulers_node_tree():
    def zoned(name: str, zone: str) -> dict:
        return node(name, labels={"topology.kubernetes.io/zone": zone})

    nodes = [zoned("a1", "a"), zoned("a2", "a"), zoned("a3", "a"), zoned("b1", "b"), zoned("c1", "c"),
             zoned("b2", "b")]
    assert [n["metadata"]["name"] for n in node_tree_order(nodes)] == ["a1", "b1", "c1", "a2", "b2", "a3"]


def test_assume_forget_bind_and_evict_update_the_cache():
    cl = cluster(node("n1", cpu="4", images=[("nginx:1.25", 1000)]), node("n2", cpu="4"), pod("p", cpu="1"))
    snapshot = cl.snapshot()
    before = snapshot.update_view()
    p = cl.pending[0]
    assumed = snapshot.assume(p, "n2")
    assert assumed.pod["spec"]["nodeName"] == "n2" and "nodeName" not in p.pod["spec"]  # never edited
    assert snapshot.node_info("n2").requested.milli_cpu == 1000
    assert before.get("n2").requested.milli_cpu == 0  # a view never changes
    assert snapshot.forget(p.uid) and snapshot.node_info("n2").requested.milli_cpu == 0
    old_node = snapshot.node_info("n2").node
    snapshot.assume(p, "n2")
    assert snapshot.bind(p.uid, "n2") == ""
    assert not snapshot.forget(p.uid)  # bound pods are not forgotten
    # Binding pulls no image: a node's images are what its status reports (kube-scheduler's cache).
    assert snapshot.node_info("n2").node is old_node
    view = snapshot.update_view()
    assert view.image_states("n2") == {}
    assert view.image_states("n1") == {"nginx:1.25": {"Size": 1000, "NumNodes": 1}}
    assert snapshot.evict(p.uid) is not None and snapshot.node_info("n2").pods == ()
    assert "no longer in the cluster" in snapshot.bind(p.uid, "n2")


def test_resources_arithmetic():
    a = Resources.from_list({"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "2"})
    b = Resources.from_list({"cpu": "500m", "nvidia.com/gpu": "2"})
    assert (a - b).milli_cpu == 500 and (a - b).scalar == {}
    assert (a + b).scalar == {"nvidia.com/gpu": 4}
    assert PodInfo.of(pod("x", cpu="2")).requests.requested.milli_cpu == 2000


def test_cluster_from_parsed_objects():
    cl = cluster_from_objects([{"kind": "Node", "metadata": {"name": "n"}}], "inline")
    assert cl.nodes[0].allocatable.milli_cpu == 0 and cl.source == "inline"

"""Case 7: faults under a real kube-scheduler. The extender is killed in the middle of a
run and started again; kube-scheduler is killed and started again; a guest traps on
some calls. Every pod ends bound exactly once, where the guest's score says (nothing is
bound behind the guest's back), and no instance stays held.
"""

from __future__ import annotations

import re
import signal
import time
from collections import Counter

from tests.e2e.cluster import GUESTS, NODENUMBER_WASM, ExtenderProcess, Harness, node_object, pod_object
from tests.e2e.process import wait_for
from tests.e2e.test_extender_e2e import digit_of, start
from wasm_scheduler.adapters.trace import read_trace

PODS = 120


def bindings_created(extender: ExtenderProcess) -> Counter[str]:
    """Pod -> how many Bindings the extender created for it, over every start of the process."""
    return Counter(str(r.get("pod")).rpartition("/")[2] for r in extender.log_records()
                   if r.get("event") == "bind.api_created")


def assert_bound_once_where_the_guest_says(harness: Harness, extender: ExtenderProcess, names: list[str],
                                          killed_mid_bind: bool = False) -> None:
    """Every pod bound where NodeNumber says, its Binding created once by the extender.
    `killed_mid_bind`: a SIGKILLed extender may have created Bindings without living to log
    them; each such pod must be one whose bind call kube-scheduler saw fail at the kill
    ("Failed to bind pod"). kube-scheduler then finds it bound: at once ("Pod has been
    assigned to node. Abort adding it back to queue.") when its informer has seen the
    Binding already, or later, when the pod's update takes it out of the queue (no line)."""
    bound = harness.cluster.wait_bound(names, timeout_s=300)
    wrong = {pod: node for pod, node in bound.items() if digit_of(pod) != digit_of(node)}
    assert not wrong, f"bound against the guest's score: {sorted(wrong.items())[:10]}"
    created = bindings_created(extender)
    assert {pod: n for pod, n in created.items() if n != 1} == {}, "a pod was bound more than once"
    unlogged = set(names) - set(created)
    if killed_mid_bind:
        scheduler_log = "\n".join(p.log_path.read_text(errors="replace") for p in harness.processes
                                  if p.name.startswith("kube-scheduler"))
        unlogged = {pod for pod in unlogged if not re.search(
            rf'"Failed to bind pod" pod="default/{re.escape(pod)}"', scheduler_log)}
    assert not unlogged, f"not bound by the extender: {sorted(unlogged)[:10]}"
    scheduled = Counter(e["involvedObject"]["name"] for e in harness.cluster.events()
                        if e.get("reason") == "Scheduled")
    # At most one: a pod whose bind answered while kube-scheduler was being killed gets none.
    assert all(scheduled[name] <= 1 for name in names), {n: scheduled[n] for n in names if scheduled[n] > 1}


def wait_nothing_held(extender: ExtenderProcess, timeout_s: float = 60) -> None:
    """The extender's last start holds no instance beyond each plugin's scheduling slot."""
    def settled() -> bool:
        trace = read_trace(extender.log_lines(last_start_only=True))
        plugins = [plugin for _uid, plugin, _instance, _where in trace.open_cycles]
        return all(n <= 1 for n in Counter(plugins).values())

    wait_for(settled, timeout_s, "every held instance given back")


def test_extender_killed_and_restarted(harness: Harness) -> None:
    harness.cluster.create_nodes(node_object(f"node-{i}") for i in range(10))
    extender, _entry = start(harness, ["--bind-timeout", "5"])
    names = harness.cluster.create_pods(pod_object(f"ext-{i}") for i in range(PODS))
    wait_for(lambda: len(harness.cluster.placements()) >= PODS // 4, 120, "a quarter of the pods bound")
    extender.process.kill()
    time.sleep(3)  # kube-scheduler's calls fail meanwhile: those pods go back to the queue
    extender.start()
    assert_bound_once_where_the_guest_says(harness, extender, names, killed_mid_bind=True)
    wait_nothing_held(extender)


def test_kube_scheduler_killed_and_restarted(harness: Harness) -> None:
    harness.cluster.create_nodes(node_object(f"node-{i}") for i in range(10))
    extender, entry = start(harness, ["--bind-timeout", "5"])
    scheduler = harness.processes[-1]
    names = harness.cluster.create_pods(pod_object(f"ks-{i}") for i in range(PODS))
    wait_for(lambda: len(harness.cluster.placements()) >= PODS // 4, 120, "a quarter of the pods bound")
    scheduler.signal(signal.SIGKILL)
    time.sleep(2)
    scheduler.kill()
    scheduler.start()
    assert_bound_once_where_the_guest_says(harness, extender, names)
    # Pods whose bind never came from the killed scheduler are reclaimed after --bind-timeout.
    wait_nothing_held(extender)


def test_guest_traps_on_some_calls(harness: Harness) -> None:
    """The chaos guest traps, loops past its deadline, runs out of memory or reads out of
    bounds on about 2% of its calls: the pods whose cycle it broke are retried by
    kube-scheduler until they pass, and each ends bound once where NodeNumber says. (A
    failed prioritize included: kube-scheduler would bind without the extender's scores;
    the extender refuses that bind, so the pod is retried as in-process.)"""
    harness.cluster.create_nodes(node_object(f"node-{i}") for i in range(10))
    extender, _entry = start(harness, ["--bind-timeout", "10"],
                             plugins={"NodeNumber": NODENUMBER_WASM, "Chaos": GUESTS / "chaos.wat"})
    names = harness.cluster.create_pods(pod_object(f"chaos-{i}") for i in range(60))
    assert_bound_once_where_the_guest_says(harness, extender, names)
    records = extender.log_records()
    assert any(r.get("event") == "call.trapped" for r in records), "the chaos guest never trapped"
    refused = [r for r in records if r.get("event") == "extender.bind_refused"]
    assert all("prioritize of pod" in str(r.get("reason")) for r in refused), refused[:3]
    wait_nothing_held(extender)

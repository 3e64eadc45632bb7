"""The framework runs extension points in kube-scheduler's order and with its rules."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tests.framework_support import Journal, cluster, config, node, pod, recorder, run
from wasm_scheduler.adapters.framework.cycle_state import CycleState
from wasm_scheduler.adapters.framework.plugins import DEFAULT_MULTIPOINT
from wasm_scheduler.adapters.framework.plugins.base import NativePlugin
from wasm_scheduler.adapters.framework.results import PodStatus
from wasm_scheduler.adapters.framework.scheduler import num_feasible_nodes_to_find
from wasm_scheduler.adapters.framework.snapshot import NodeInfo
from wasm_scheduler.framework_api import SUCCESS, Code, PreFilterResult, ScoreResult, Status

SCHEDULING = ["pre_filter", "filter", "pre_score", "score", "normalize_score", "reserve", "permit"]


def test_extension_points_run_in_kube_scheduler_order(compiler):
    journal = Journal()
    report = run(config("Rec"), cluster(node("a"), node("b"), pod("p")), compiler, {"Rec": recorder(journal)})
    assert report.outcome("default/p").status == PodStatus.SCHEDULED
    # Bind: DefaultBinder (a default, so before Rec in multiPoint order) binds; Rec is not asked.
    assert journal.points("p") == SCHEDULING + ["pre_bind", "post_bind"]


def test_a_single_feasible_node_is_not_scored(compiler):
    journal = Journal()
    run(config("Rec"), cluster(node("a"), pod("p")), compiler, {"Rec": recorder(journal)})
    assert journal.points("p") == ["pre_filter", "filter", "reserve", "permit", "pre_bind", "post_bind"]


def test_plugins_of_one_point_run_in_configured_order(compiler):
    journal = Journal()
    registry = {"First": recorder(journal), "Second": recorder(journal)}
    run(config("First", "Second"), cluster(node("a"), node("b"), pod("p")), compiler, registry)
    pre_filters = [pl for pl, pt, _p in journal.calls if pt == "pre_filter"]
    unreserve_free = [(pl, pt) for pl, pt, _p in journal.calls if pt in ("reserve", "permit")]
    assert pre_filters == ["First", "Second"]
    assert unreserve_free == [("First", "reserve"), ("Second", "reserve"), ("First", "permit"), ("Second", "permit")]


def test_explicit_point_entries_come_before_multipoint_ones(compiler):
    journal = Journal()
    registry = {"First": recorder(journal), "Second": recorder(journal)}
    cfg = config("First", "Second", plugins={"preFilter": {"enabled": [{"name": "Second"}]}})
    run(cfg, cluster(node("a"), node("b"), pod("p")), compiler, registry)
    assert [pl for pl, pt, _p in journal.calls if pt == "pre_filter"] == ["Second", "First"]
    assert [pl for pl, pt, _p in journal.calls if pt == "filter"] == ["First", "Second"]


def test_prefilter_node_subsets_intersect(compiler):
    journal = Journal()
    registry = {
        "A": recorder(journal, {("pre_filter", "p"): PreFilterResult(SUCCESS, frozenset({"n1", "n2", "n3"}))}),
        "B": recorder(journal, {("pre_filter", "p"): PreFilterResult(SUCCESS, frozenset({"n2", "n3", "n4"}))}),
    }
    nodes = [node(f"n{i}") for i in range(1, 6)]
    report = run(config("A", "B"), cluster(*nodes, pod("p")), compiler, registry)
    assert report.outcome("default/p").node in {"n2", "n3"}
    a = registry["A"].instances[0]
    assert sorted(a.seen_nodes["filter"][0]) == ["n2", "n3"]


def test_disjoint_prefilter_subsets_make_the_pod_unschedulable(compiler):
    journal = Journal()
    registry = {
        "A": recorder(journal, {("pre_filter", "p"): PreFilterResult(SUCCESS, frozenset({"n1"}))}),
        "B": recorder(journal, {("pre_filter", "p"): PreFilterResult(SUCCESS, frozenset({"n2"}))}),
    }
    report = run(config("A", "B"), cluster(node("n1"), node("n2"), pod("p")), compiler, registry)
    outcome = report.outcome("default/p")
    assert outcome.status == PodStatus.UNSCHEDULABLE
    assert "didn't satisfy plugin(s) [A B] simultaneously" in outcome.reason
    assert "filter" not in journal.points("p")


def test_nodes_outside_the_prefilter_subset_are_counted_in_the_reason(compiler):
    journal = Journal()
    registry = {"A": recorder(journal, {("pre_filter", "p"): PreFilterResult(SUCCESS, frozenset({"n1"})),
                                        ("filter", "p"): {"n1": Status(Code.UNSCHEDULABLE, "not this one")}})}
    report = run(config("A"), cluster(node("n1"), node("n2"), node("n3"), pod("p")), compiler, registry)
    reason = report.outcome("default/p").reason
    assert reason.startswith("0/3 nodes are available: 1 not this one (A), "
                             "2 node is filtered out by the prefilter result.")


def test_an_unschedulable_prefilter_lets_every_prefilter_run_and_skips_filter(compiler):
    # kube-scheduler 1.28 on (kubernetes#119770): preemption, later in the cycle, needs
    # every plugin's PreFilter state, so an Unschedulable rejection does not stop the point.
    journal = Journal()
    registry = {
        "A": recorder(journal, {("pre_filter", "p"): PreFilterResult(Status(Code.UNSCHEDULABLE, "not today"))}),
        "B": recorder(journal),
    }
    report = run(config("A", "B"), cluster(node("n1"), pod("p")), compiler, registry)
    outcome = report.outcome("default/p")
    assert outcome.status == PodStatus.UNSCHEDULABLE
    assert "not today (A)" in outcome.reason
    assert journal.points("p", "A") == ["pre_filter"]
    assert journal.points("p", "B") == ["pre_filter"]  # run, but no Filter: the pod fits nowhere


def test_an_unresolvable_prefilter_stops_the_point(compiler):
    journal = Journal()
    unresolvable = PreFilterResult(Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "never"))
    registry = {"A": recorder(journal, {("pre_filter", "p"): unresolvable}), "B": recorder(journal)}
    report = run(config("A", "B"), cluster(node("n1"), pod("p")), compiler, registry)
    outcome = report.outcome("default/p")
    assert outcome.status == PodStatus.UNSCHEDULABLE and "never (A)" in outcome.reason
    assert journal.points("p", "B") == []  # B's cycle never began: no later point calls it
    assert journal.points("p", "A") == ["pre_filter"]


def test_prefilter_skip_skips_that_plugins_filter(compiler):
    journal = Journal()
    registry = {"A": recorder(journal, {("pre_filter", "p"): PreFilterResult(Status(Code.SKIP))})}
    report = run(config("A"), cluster(node("n1"), pod("p")), compiler, registry)
    assert report.outcome("default/p").status == PodStatus.SCHEDULED
    assert "filter" not in journal.points("p", "A")


def test_filter_is_one_call_per_plugin_and_later_plugins_see_only_survivors(compiler):
    journal = Journal()
    rejected = {"n1": Status(Code.UNSCHEDULABLE, "first says no")}
    registry = {"A": recorder(journal, {("filter", "p"): rejected}),
                "B": recorder(journal, {("filter", "p"): {"n2": Status(Code.UNSCHEDULABLE, "second says no"),
                                                          "n1": Status(Code.UNSCHEDULABLE, "never asked")}})}
    nodes = [node("n1"), node("n2"), node("n3")]
    report = run(config("A", "B"), cluster(*nodes, pod("p")), compiler, registry)
    assert report.outcome("default/p").node == "n3"
    assert registry["A"].instances[0].seen_nodes["filter"] == [["n1", "n2", "n3"]]
    assert registry["B"].instances[0].seen_nodes["filter"] == [["n2", "n3"]]


def test_unschedulable_reason_names_the_first_rejecting_plugin_per_node(compiler):
    journal = Journal()
    registry = {"A": recorder(journal, {("filter", "p"): {"n1": Status(Code.UNSCHEDULABLE, "first says no")}}),
                "B": recorder(journal, {("filter", "p"): {"n2": Status(Code.UNSCHEDULABLE, "second says no")}})}
    report = run(config("A", "B"), cluster(node("n1"), node("n2"), pod("p")), compiler, registry)
    reason = report.outcome("default/p").reason
    assert reason.startswith("0/2 nodes are available:")
    assert "1 first says no (A)" in reason and "1 second says no (B)" in reason


def test_filter_error_is_an_error_not_unschedulable(compiler):
    journal = Journal()
    registry = {"A": recorder(journal, {("filter", "p"): {"n1": Status(Code.ERROR, "boom")}})}
    report = run(config("A"), cluster(node("n1"), pod("p")), compiler, registry)
    outcome = report.outcome("default/p")
    assert outcome.status == PodStatus.ERROR
    assert "boom" in outcome.reason and "'A'" in outcome.reason


def test_scores_are_weighted_and_summed(compiler):
    journal = Journal()
    registry = {"A": recorder(journal, {("score", "p"): {"n1": 10, "n2": 40}}),
                "B": recorder(journal, {("score", "p"): {"n1": 50, "n2": 0}})}
    # Only the test plugins score: disable the default score plugins at that point.
    plugins = {"score": {"disabled": [{"name": n} for n, weight in DEFAULT_MULTIPOINT if weight]}}
    a_wins = run(config(("A", 2), ("B", 1), plugins=plugins), cluster(node("n1"), node("n2"), pod("p")), compiler,
                 registry)
    assert a_wins.outcome("default/p").node == "n2"  # n1: 20+50=70, n2: 80+0=80
    assert a_wins.outcome("default/p").scores == {"A": 80, "B": 0}
    b_wins = run(config(("A", 1), ("B", 1), plugins=plugins), cluster(node("n1"), node("n2"), pod("p")), compiler,
                 registry)
    assert b_wins.outcome("default/p").node == "n1"  # n1: 60, n2: 40


def test_a_score_out_of_range_after_normalizing_is_an_error(compiler):
    journal = Journal()
    registry = {"A": recorder(journal, {("score", "p"): {"n1": 101}})}
    report = run(config("A"), cluster(node("n1"), node("n2"), pod("p")), compiler, registry)
    outcome = report.outcome("default/p")
    assert outcome.status == PodStatus.ERROR
    assert "invalid score 101" in outcome.reason


def test_bind_takes_the_first_plugin_that_does_not_skip(compiler):
    journal = Journal()
    registry = {"Skipper": recorder(journal),  # Bind returns Skip by default
                "Binder": recorder(journal, {("bind", "p"): SUCCESS})}
    # Explicit bind entries come before the multiPoint ones (DefaultBinder).
    cfg = config("Skipper", "Binder", plugins={"bind": {"enabled": [{"name": "Skipper"}, {"name": "Binder"}]}})
    report = run(cfg, cluster(node("n1"), pod("p")), compiler, registry)
    assert report.outcome("default/p").status == PodStatus.SCHEDULED
    binds = [pl for pl, pt, _p in journal.calls if pt == "bind"]
    assert binds == ["Skipper", "Binder"]  # DefaultBinder (after them) is never asked


def test_every_binder_skipping_is_an_error(compiler):
    journal = Journal()
    registry = {"Skipper": recorder(journal)}
    cfg = config("Skipper", plugins={"bind": {"disabled": [{"name": "DefaultBinder"}]}})
    report = run(cfg, cluster(node("n1"), pod("p")), compiler, registry)
    assert report.outcome("default/p").status == PodStatus.ERROR
    assert "Skip" in report.outcome("default/p").reason


def test_num_feasible_nodes_to_find_follows_kube_scheduler():
    assert num_feasible_nodes_to_find(None, 50) == 50  # under 100 nodes: all of them
    assert num_feasible_nodes_to_find(10, 99) == 99
    assert num_feasible_nodes_to_find(10, 500) == 100  # never fewer than 100
    assert num_feasible_nodes_to_find(30, 1000) == 300
    assert num_feasible_nodes_to_find(None, 1000) == 420  # adaptive: 50 - 1000/125 = 42 %
    assert num_feasible_nodes_to_find(0, 5000) == 500  # 50 - 40 = 10 %
    assert num_feasible_nodes_to_find(None, 10000) == 500  # floor of 5 %
    assert num_feasible_nodes_to_find(100, 300) == 300


def test_percentage_of_nodes_to_score_limits_the_search_and_rotates_the_start(compiler):
    journal = Journal()
    registry = {"Rec": recorder(journal)}
    nodes = [node(f"n{i:03d}") for i in range(250)]
    report = run(config("Rec", percentage=40), cluster(*nodes, pod("p1"), pod("p2"), pod("p3")), compiler, registry)
    assert all(o.status == PodStatus.SCHEDULED for o in report.pods)
    rec = registry["Rec"].instances[0]
    scored = rec.seen_nodes["score"]
    assert [len(s) for s in scored] == [100, 100, 100]  # 40 % of 250
    # Each pod starts where the last one stopped (every node is feasible here).
    assert scored[0][0] == "n000" and scored[1][0] == "n100" and scored[2][0] == "n200"
    assert scored[2][-1] == "n049"


class Crash(NativePlugin):
    """Raises in Filter for pods named crash-*, in Reserve for pods named boom-*."""

    def filter(self, state: CycleState, pod: dict, node: NodeInfo) -> Status:
        if pod["metadata"]["name"].startswith("crash"):
            raise RuntimeError("plugin bug")
        return SUCCESS

    def reserve(self, state: CycleState, pod: dict, node_name: str) -> Status:
        if pod["metadata"]["name"].startswith("boom"):
            raise RuntimeError("reserve bug")
        return SUCCESS


def test_a_plugin_that_raises_fails_its_pod_and_the_run_goes_on(compiler):
    cl = cluster(node("n1", cpu="1"), pod("crash-1", cpu="600m"), pod("boom-1", cpu="600m"), pod("fine", cpu="600m"))
    report = run(config("Crash"), cl, compiler, {"Crash": Crash})
    assert report.outcome("default/crash-1").status == PodStatus.ERROR
    assert "RuntimeError: plugin bug" in report.outcome("default/crash-1").reason
    assert report.outcome("default/boom-1").status == PodStatus.ERROR
    # boom-1 was assumed on n1 when Reserve raised: forgotten again, so "fine" fits.
    assert report.outcome("default/fine").node == "n1"


class ColumnScorer(NativePlugin):
    """Scores as a guest does: names and scores side by side (`ScoreResult.from_columns`)."""

    NAME = "Columns"

    def __init__(self, ctx: Any, scores: dict[str, int], results: list[ScoreResult]) -> None:
        super().__init__(ctx)
        self.scores, self.results = scores, results

    def score_nodes(self, state: CycleState, pod: Any, nodes: Sequence[NodeInfo]) -> ScoreResult:
        names = [n.name for n in nodes if n.name in self.scores]
        result = ScoreResult.from_columns(SUCCESS, names, [self.scores[n] for n in names])
        self.results.append(result)
        return result


def test_a_score_given_as_columns_is_weighted_without_making_node_scores(compiler):
    results: list[ScoreResult] = []
    registry = {"Columns": lambda ctx: ColumnScorer(ctx, {"n1": 30, "n2": 70}, results)}
    plugins = {"score": {"disabled": [{"name": n} for n, weight in DEFAULT_MULTIPOINT if weight]}}
    report = run(config(("Columns", 3), plugins=plugins), cluster(node("n1"), node("n2"), pod("p")), compiler,
                 registry)
    assert report.outcome("default/p").node == "n2" and report.outcome("default/p").scores == {"Columns": 210}
    assert results and all(r._scores is None for r in results)  # read as pairs only


def test_a_score_given_as_columns_must_cover_the_nodes(compiler):
    registry = {"Columns": lambda ctx: ColumnScorer(ctx, {"n1": 30}, [])}
    report = run(config("Columns"), cluster(node("n1"), node("n2"), pod("p")), compiler, registry)
    assert report.outcome("default/p").status == PodStatus.ERROR
    assert "scored 1 of 2 nodes" in report.outcome("default/p").reason


def test_unreserve_and_postbind_reach_every_plugin_even_after_one_raised() -> None:
    # Each plugin's Unreserve or PostBind gives its wasm instance back: a bug in one
    # plugin must not keep the others' instances; the bug itself still surfaces.
    import pytest

    from wasm_scheduler.adapters.framework.profile import framework_of

    calls: list[str] = []

    class Raises(NativePlugin):
        def unreserve(self, state: CycleState, pod: Any, node_name: str) -> None:
            raise RuntimeError("unreserve bug")

        def post_bind(self, state: CycleState, pod: Any, node_name: str) -> None:
            raise RuntimeError("postbind bug")

    class Counts(NativePlugin):
        def unreserve(self, state: CycleState, pod: Any, node_name: str) -> None:
            calls.append("unreserve")

        def post_bind(self, state: CycleState, pod: Any, node_name: str) -> None:
            calls.append("post_bind")

    framework = framework_of("test", [(Counts(name="counts"), 1), (Raises(name="raises"), 1)])
    with pytest.raises(RuntimeError, match="unreserve bug"):
        framework.run_unreserve(CycleState(), pod("p"), "a")  # reverse order: Raises goes first
    framework.points["post_bind"].reverse()  # Raises first here too
    with pytest.raises(RuntimeError, match="postbind bug"):
        framework.run_post_bind(CycleState(), pod("p"), "a")
    assert calls == ["unreserve", "post_bind"]


def test_a_filter_plugin_whose_prefilter_did_not_run_fails_every_node() -> None:
    # Only preemption filters such a pod; kube-scheduler would run that plugin's Filter,
    # which fails without its PreFilter's state. (A wasm plugin has no cycle to call.)
    from wasm_scheduler.adapters.framework.profile import framework_of
    from wasm_scheduler.adapters.framework.resources import Resources

    class Passes(NativePlugin):
        def filter(self, state: CycleState, pod: Any, node: NodeInfo) -> Status:
            return SUCCESS

    framework = framework_of("test", [(Passes(name="first"), 1), (Passes(name="late"), 1)])
    state = CycleState()
    state.not_started.add("late")
    nodes = [NodeInfo(node(n), Resources()) for n in ("a", "b")]
    statuses, error = framework.run_filter(state, pod("p"), nodes)
    assert error.ok and {n: s.code for n, s in statuses.items()} == {
        "a": Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "b": Code.UNSCHEDULABLE_AND_UNRESOLVABLE}
    assert statuses["a"].plugin == "late" and "did not run" in statuses["a"].reason

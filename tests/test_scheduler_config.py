"""KubeSchedulerConfiguration: parsing, merging with the defaults, placing plugins."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.framework_support import Journal, cluster, config, node, recorder
from wasm_scheduler.adapters.framework import Scheduler, UserError, config_from_dict, default_config, load_config
from wasm_scheduler.adapters.framework.config import API_VERSION, KIND
from wasm_scheduler.adapters.framework.plugins.base import NativePlugin

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def doc(**fields):
    return {"apiVersion": API_VERSION, "kind": KIND, **fields}


def frameworks(cfg, compiler, registry=None):
    scheduler = Scheduler(cfg, cluster(node("n1")), compiler, registry)
    return scheduler


def test_the_default_profile(compiler):
    cfg = default_config()
    assert [p.scheduler_name for p in cfg.profiles] == ["default-scheduler"]
    with frameworks(cfg, compiler) as scheduler:
        fw = scheduler.frameworks["default-scheduler"]
        assert fw.names("queue_sort") == ["PrioritySort"]
        assert fw.names("pre_filter") == ["NodeAffinity", "NodePorts", "NodeResourcesFit", "PodTopologySpread",
                                          "InterPodAffinity"]
        assert fw.names("filter") == ["NodeUnschedulable", "NodeName", "TaintToleration", "NodeAffinity",
                                      "NodePorts", "NodeResourcesFit", "PodTopologySpread", "InterPodAffinity"]
        assert fw.names("post_filter") == ["DefaultPreemption"]
        assert fw.names("score") == ["TaintToleration", "NodeAffinity", "NodeResourcesFit", "PodTopologySpread",
                                     "InterPodAffinity", "NodeResourcesBalancedAllocation", "ImageLocality"]
        assert fw.score_weights == {"TaintToleration": 3, "NodeAffinity": 2, "NodeResourcesFit": 1,
                                    "PodTopologySpread": 2, "InterPodAffinity": 2, "NodeResourcesBalancedAllocation": 1,
                                    "ImageLocality": 1}
        assert list(fw.plugins)[:2] == ["SchedulingGates", "PrioritySort"]  # kube-scheduler 1.33's order
        assert fw.names("normalize_score") == ["TaintToleration", "NodeAffinity", "PodTopologySpread",
                                               "InterPodAffinity"]
        assert fw.names("bind") == ["DefaultBinder"]


def test_the_example_configuration_adds_nodenumber_through_multipoint(compiler):
    cfg = load_config(EXAMPLES / "scheduler-config.yaml")
    assert cfg.base_dir == str(EXAMPLES)
    with frameworks(cfg, compiler) as scheduler:
        fw = scheduler.frameworks["default-scheduler"]
        assert fw.names("pre_filter")[-1] == "NodeNumber"
        assert fw.names("pre_score")[-1] == "NodeNumber" and fw.names("score")[-1] == "NodeNumber"
        assert "NodeNumber" not in fw.names("filter")  # its guest exports no filter
        assert fw.names("permit") == ["NodeNumber"] and fw.names("reserve") == ["NodeNumber"]
        assert fw.score_weights["NodeNumber"] == 1


def test_multipoint_defaults_can_be_disabled_reweighted_and_replaced(compiler):
    cfg = config_from_dict(doc(profiles=[{"plugins": {
        "multiPoint": {"enabled": [{"name": "TaintToleration", "weight": 7}],
                       "disabled": [{"name": "NodeAffinity"}]},
        "score": {"disabled": [{"name": "NodeResourcesFit"}]},
    }}]))
    with frameworks(cfg, compiler) as scheduler:
        fw = scheduler.frameworks["default-scheduler"]
        assert "NodeAffinity" not in fw.plugins
        assert fw.names("score") == ["TaintToleration", "PodTopologySpread", "InterPodAffinity",
                                     "NodeResourcesBalancedAllocation", "ImageLocality"]
        assert fw.score_weights == {"TaintToleration": 7, "PodTopologySpread": 2, "InterPodAffinity": 2,
                                    "NodeResourcesBalancedAllocation": 1, "ImageLocality": 1}
        assert "NodeResourcesFit" in fw.names("filter")


def test_a_score_entry_weight_wins_over_multipoint(compiler):
    journal = Journal()
    cfg = config(("Rec", 2), plugins={"score": {"enabled": [{"name": "Rec", "weight": 5}]}})
    with frameworks(cfg, compiler, {"Rec": recorder(journal)}) as scheduler:
        fw = scheduler.frameworks["default-scheduler"]
        assert fw.score_weights["Rec"] == 5
        assert fw.names("score")[0] == "Rec"  # explicit entries override and come first


def test_disabling_every_default_leaves_only_what_is_named(compiler):
    cfg = config_from_dict(doc(profiles=[{"plugins": {"multiPoint": {
        "enabled": [{"name": "PrioritySort"}, {"name": "DefaultBinder"}], "disabled": [{"name": "*"}]}}}]))
    with frameworks(cfg, compiler) as scheduler:
        assert sorted(scheduler.frameworks["default-scheduler"].plugins) == ["DefaultBinder", "PrioritySort"]


def test_several_profiles(compiler):
    cfg = config_from_dict(doc(profiles=[{}, {"schedulerName": "other", "percentageOfNodesToScore": 30}],
                               percentageOfNodesToScore=70))
    with frameworks(cfg, compiler) as scheduler:
        assert scheduler.frameworks["default-scheduler"].percentage_of_nodes_to_score == 70
        assert scheduler.frameworks["other"].percentage_of_nodes_to_score == 30


@pytest.mark.parametrize(("fields", "message"), [
    ({"kind": "Nope"}, "kind: expected KubeSchedulerConfiguration"),
    ({"apiVersion": "kubescheduler.config.k8s.io/v1beta3"}, "apiVersion: expected kubescheduler.config.k8s.io/v1"),
    ({"percentageOfNodesToScore": 101}, "percentageOfNodesToScore: expected an integer from 0 to 100"),
    ({"bogus": 1}, "bogus: unknown field of KubeSchedulerConfiguration"),
    ({"extenders": [{"urlPrefix": "http://x"}]}, "extenders: scheduler extenders are not supported"),
    ({"profiles": [{}, {}]}, "profiles[1]: schedulerName: 'default-scheduler' is the name of another profile"),
    ({"profiles": [{"plugins": {"sort": {}}}]}, "plugins.sort: unknown extension point"),
    ({"profiles": [{"plugins": {"score": {"enabled": [{"name": "X", "weight": -1}]}}}]},
     "plugins.score.enabled[0].weight: expected a non-negative integer"),
    ({"profiles": [{"pluginConfig": [{"name": "A"}, {"name": "A"}]}]},
     "pluginConfig[1].name: a second pluginConfig entry for 'A'"),
    ({"profiles": [{"plugins": {"preEnqueue": {"enabled": [{"name": "SchedulingGates"}]}}}]},
     "PreEnqueue plugins are not supported"),
])
def test_configuration_mistakes(fields, message):
    with pytest.raises(UserError) as info:
        config_from_dict(doc(**fields), "sched.yaml")
    assert str(info.value).startswith("sched.yaml")
    assert message in str(info.value)


@pytest.mark.parametrize(("plugins", "plugin_config", "message"), [
    ({"multiPoint": {"enabled": [{"name": "Frobnicate"}]}}, [],
     "plugins.multiPoint.enabled[0].name: unknown plugin 'Frobnicate'"),
    ({"multiPoint": {"enabled": [{"name": "VolumeBinding"}]}}, [],
     "'VolumeBinding' is a kube-scheduler plugin this simulator does not implement"),
    ({"queueSort": {"enabled": [{"name": "DefaultBinder"}]}}, [],
     "plugins.queueSort.enabled[0].name: plugin 'DefaultBinder' does not extend queueSort"),
    ({"multiPoint": {"disabled": [{"name": "PrioritySort"}]}}, [], "exactly one queueSort plugin is needed, got 0"),
    ({"multiPoint": {"disabled": [{"name": "DefaultBinder"}]}}, [], "at least one bind plugin is needed"),
    ({}, [{"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "RequestedToCapacityRatio"}}}],
     "pluginConfig[0] (NodeResourcesFit): args: scoringStrategy.type: 'RequestedToCapacityRatio' is not supported"),
    ({}, [{"name": "DefaultPreemption", "args": {"minCandidateNodesPercentage": 200}}],
     "minCandidateNodesPercentage: expected an integer 0..100"),
])
def test_plugin_mistakes_name_the_profile_and_field(compiler, plugins, plugin_config, message):
    cfg = config_from_dict(doc(profiles=[{"plugins": plugins, "pluginConfig": plugin_config}]), "sched.yaml")
    with pytest.raises(UserError) as info:
        Scheduler(cfg, cluster(node("n1")), compiler)
    assert str(info.value).startswith("sched.yaml: profiles[0] (default-scheduler)")
    assert message in str(info.value)


class Fifo(NativePlugin):
    def less(self, a, b):
        return a.timestamp < b.timestamp


def test_profiles_must_share_a_queue_sort(compiler):
    cfg = config_from_dict(doc(profiles=[{}, {"schedulerName": "fifo", "plugins": {
        "queueSort": {"enabled": [{"name": "Fifo"}], "disabled": [{"name": "*"}]}}}]), "sched.yaml")
    with pytest.raises(UserError, match="every profile must use the same queueSort plugin"):
        Scheduler(cfg, cluster(node("n1")), compiler, {"Fifo": Fifo})


def test_a_relative_guest_url_is_read_from_the_configurations_directory(tmp_path, compiler):
    (tmp_path / "guests").mkdir()
    (tmp_path / "guests" / "nn.wasm").write_bytes((EXAMPLES / "nodenumber" / "nodenumber.wasm").read_bytes())
    path = tmp_path / "sched.yaml"
    path.write_text(f"""
apiVersion: {API_VERSION}
kind: {KIND}
profiles:
- plugins:
    multiPoint:
      enabled: [{{name: NN}}]
  pluginConfig:
  - name: NN
    args: {{guestURL: guests/nn.wasm}}
""")
    with Scheduler(load_config(path), cluster(node("n1")), compiler) as scheduler:
        assert "NN" in scheduler.frameworks["default-scheduler"].names("score")

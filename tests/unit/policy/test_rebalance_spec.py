"""spec.rebalance: off unless written, defaults from the trigger metric's threshold, and
every problem said in a sentence; the CRD's CEL rules say the same."""

from __future__ import annotations

import pathlib
import re

import pytest
import yaml

from metricsched.core import model, policy

CRD_PATH = pathlib.Path(__file__).resolve().parents[3] / "crds" / "schedulingpolicy.yaml"


def body(rebalance=None, *, threshold=None, mode=None):
    metric = {"name": "latency", "prometheus": {"query": "up"}}
    if threshold is not None:
        metric["threshold"] = threshold
    spec = {"metrics": [metric]}
    if rebalance is not None:
        spec["rebalance"] = rebalance
    if mode is not None:
        spec["mode"] = mode
    return {"metadata": {"name": "web", "namespace": "shop"}, "spec": spec}


def problems_of(raw) -> tuple[str, ...]:
    with pytest.raises(policy.PolicyError) as caught:
        policy.policy_from_body(raw)
    return caught.value.problems


def test_rebalance_is_off_unless_written():
    assert policy.policy_from_body(body(threshold={"max": 0.5})).rebalance is None


def test_a_trigger_naming_only_its_metric_takes_the_thresholds_max_and_the_crd_defaults():
    parsed = policy.policy_from_body(
        body({"trigger": {"metric": "latency"}}, threshold={"max": 0.5})
    )
    assert parsed.rebalance == model.RebalanceSpec(
        mode=model.RebalanceMode.DRY_RUN,
        metric="latency",
        above=0.5,
        below=None,
        window_s=300.0,
        interval_s=60.0,
        max_per_node=1,
        max_total=5,
        min_pod_age_s=300.0,
        margin=pytest.approx(0.05),
    )


def test_a_threshold_with_only_a_min_triggers_below_it():
    parsed = policy.policy_from_body(
        body({"trigger": {"metric": "latency"}}, threshold={"min": 0.2})
    )
    assert parsed.rebalance is not None
    assert (parsed.rebalance.above, parsed.rebalance.below) == (None, 0.2)


def test_everything_written_is_taken():
    parsed = policy.policy_from_body(
        body(
            {
                "mode": "Evict",
                "trigger": {"metric": "latency", "above": 0.7},
                "window": "2m",
                "interval": "30s",
                "maxPerNode": 2,
                "maxTotal": 10,
                "minPodAge": "30s",
                "margin": 0.2,
                "workloadInterval": "10m",
                "maxPerWorkload": 3,
                "evictJobPods": True,
            }
        )
    )
    assert parsed.rebalance == model.RebalanceSpec(
        mode=model.RebalanceMode.EVICT,
        metric="latency",
        above=0.7,
        below=None,
        window_s=120.0,
        interval_s=30.0,
        max_per_node=2,
        max_total=10,
        min_pod_age_s=30.0,
        margin=0.2,
        workload_interval_s=600.0,
        max_per_workload=3,
        evict_job_pods=True,
    )


def test_a_stored_policy_below_the_floors_is_read_at_the_floors():
    # The CRD refuses these now; one stored before keeps scheduling, at the floors.
    parsed = policy.policy_from_body(
        body(
            {
                "trigger": {"metric": "latency", "above": 1},
                "window": "1ms",
                "interval": "1ms",
                "minPodAge": "0s",
                "workloadInterval": "1s",
            }
        )
    )
    assert parsed.rebalance is not None
    assert (
        parsed.rebalance.window_s,
        parsed.rebalance.interval_s,
        parsed.rebalance.min_pod_age_s,
        parsed.rebalance.workload_interval_s,
    ) == (10.0, 5.0, 5.0, 10.0)


def test_job_pods_are_left_alone_and_a_workload_moves_by_its_size_per_5m_by_default():
    parsed = policy.policy_from_body(body({"trigger": {"metric": "latency", "above": 1}}))
    assert parsed.rebalance is not None
    assert parsed.rebalance.evict_job_pods is False
    assert parsed.rebalance.workload_interval_s == 300.0
    spec = parsed.rebalance
    assert (spec.max_per_workload, spec.max_per_workload_percent) == (None, None)
    assert [spec.workload_limit(pods) for pods in (1, 3, 4, 10, 11, 20, 21, 29, 30, 100)] == [
        1, 1, 2, 2, 2, 2, 2, 2, 3, 10,
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("written", "limits"),
    [
        (0, [0, 0, 0]),  # moves nothing
        (3, [3, 3, 3]),  # a count, whatever the workload's size
        ("0%", [0, 0, 0]),
        ("10%", [1, 1, 5]),  # of 1, 15 and 50 pods: rounded down, at least 1
        ("100%", [1, 15, 50]),
    ],
)
def test_max_per_workload_is_a_count_or_a_share_of_the_workloads_pods(written, limits):
    raw = body({"trigger": {"metric": "latency", "above": 1}, "maxPerWorkload": written})
    spec = policy.policy_from_body(raw).rebalance
    assert spec is not None
    assert [spec.workload_limit(pods) for pods in (1, 15, 50)] == limits


@pytest.mark.parametrize("written", ["10", "10 %", "101%", "-1%", "ten", -1, 1001, 1.5, True])
def test_a_max_per_workload_neither_count_nor_percentage_is_said(written):
    raw = body({"trigger": {"metric": "latency", "above": 1}, "maxPerWorkload": written})
    (problem,) = [p for p in problems_of(raw) if p.startswith("spec.rebalance.maxPerWorkload")]
    assert repr(written) in problem


def test_the_crd_takes_a_count_or_a_percentage_for_max_per_workload():
    schema = yaml.safe_load(CRD_PATH.read_text())["spec"]["versions"][0]["schema"]
    rebalance = schema["openAPIV3Schema"]["properties"]["spec"]["properties"]["rebalance"]
    field = rebalance["properties"]["maxPerWorkload"]
    assert field["x-kubernetes-int-or-string"] is True
    assert "default" not in field  # unset: scaled with the workload
    # The API's int-or-string: bare types in anyOf (anything more is not structural), the
    # bounds beside them (a count's minimum and maximum, a percentage's pattern).
    assert field["anyOf"] == [{"type": "integer"}, {"type": "string"}]
    assert (field["minimum"], field["maximum"], field["maxLength"]) == (0, 1000, 4)
    pattern = re.compile(field["pattern"])
    assert [bool(pattern.match(v)) for v in ("0%", "10%", "100%", "101%", "10", "1.5%")] == [
        True, True, True, False, False, False,
    ]  # fmt: skip


def test_several_triggers_each_take_their_own_threshold_and_margin():
    raw = body(
        {
            "triggers": [
                {"metric": "latency"},
                {"metric": "cpu", "above": 0.8, "margin": 0.02},
            ],
            "margin": 0.05,
        },
        threshold={"max": 0.5},
    )
    raw["spec"]["metrics"].append({"name": "cpu", "prometheus": {"query": "up"}})
    parsed = policy.policy_from_body(raw).rebalance
    assert parsed is not None
    assert parsed.triggers == (
        model.Trigger(metric="latency", above=0.5, below=None, margin=0.05),
        model.Trigger(metric="cpu", above=0.8, below=None, margin=0.02),
    )


def test_a_single_trigger_policy_reads_as_one_trigger():
    parsed = policy.policy_from_body(body({"trigger": {"metric": "latency", "above": 1}}))
    assert parsed.rebalance is not None
    assert parsed.rebalance.triggers == (
        model.Trigger(metric="latency", above=1.0, below=None, margin=pytest.approx(0.1)),
    )


@pytest.mark.parametrize(
    ("rebalance", "expected"),
    [
        (
            {"trigger": {"metric": "latency", "above": 1}, "triggers": [{"metric": "latency"}]},
            "spec.rebalance: set trigger or triggers, not both",
        ),
        ({"triggers": []}, "spec.rebalance.triggers: must be a list of 1 to 5 triggers, got []"),
        (
            {"triggers": [{"metric": "latency", "above": 1}, {"metric": "latency", "above": 2}]},
            "spec.rebalance.triggers: name each metric at most once",
        ),
        (
            {"triggers": [{"metric": "cpu", "above": 1}]},
            "spec.rebalance.triggers[0].metric: 'cpu' is not one of the policy's metrics (latency)",
        ),
        (
            {"trigger": {"metric": "latency", "above": 1}, "evictJobPods": "yes"},
            "spec.rebalance.evictJobPods: must be true or false, got 'yes'",
        ),
    ],
)
def test_each_problem_of_the_new_fields_is_said(rebalance, expected):
    assert expected in problems_of(body(rebalance))


@pytest.mark.parametrize(
    ("rebalance", "expected"),
    [
        ({}, "spec.rebalance.trigger: must be an object, got None"),
        ({"trigger": {}}, "spec.rebalance.trigger.metric: must name one of the policy's metrics"),
        (
            {"trigger": {"metric": "cpu"}},
            "spec.rebalance.trigger.metric: 'cpu' is not one of the policy's metrics (latency)",
        ),
        (
            {"trigger": {"metric": "latency"}},
            "spec.rebalance.trigger: metric 'latency' has no threshold: set trigger.above "
            "or trigger.below",
        ),
        (
            {"trigger": {"metric": "latency", "above": 1, "below": 0}},
            "spec.rebalance.trigger: set above or below, not both",
        ),
        (
            {"trigger": {"metric": "latency", "above": 1}, "mode": "Now"},
            "spec.rebalance.mode: must be one of DryRun, Evict, got 'Now'",
        ),
        (
            {"trigger": {"metric": "latency", "above": 1}, "window": "0s"},
            "spec.rebalance.window: must be more than 0s and at most 24h, got '0s'",
        ),
        (
            {"trigger": {"metric": "latency", "above": 1}, "interval": "25h"},
            "spec.rebalance.interval: must be more than 0s and at most 24h, got '25h'",
        ),
        (
            {"trigger": {"metric": "latency", "above": 1}, "minPodAge": "soon"},
            "spec.rebalance.minPodAge: must be a duration such as 2m, 60s or 1m30s, got 'soon'",
        ),
        (
            {"trigger": {"metric": "latency", "above": 1}, "maxPerNode": -1},
            "spec.rebalance.maxPerNode: must be an integer from 0 to 1000, got -1",
        ),
        (
            {"trigger": {"metric": "latency", "above": 1}, "maxTotal": 1.5},
            "spec.rebalance.maxTotal: must be an integer from 0 to 1000, got 1.5",
        ),
        (
            {"trigger": {"metric": "latency", "above": 1}, "margin": -0.1},
            "spec.rebalance.margin: must not be negative, got -0.1",
        ),
    ],
)
def test_each_problem_is_said(rebalance, expected):
    assert expected in problems_of(body(rebalance))


def test_a_shadow_policy_cannot_rebalance():
    assert (
        "spec.rebalance: is only allowed with mode: Active (a shadow policy places no pod)"
        in problems_of(body({"trigger": {"metric": "latency", "above": 1}}, mode="Shadow"))
    )


def test_the_crds_cel_rules_cover_the_cross_field_checks():
    schema = yaml.safe_load(CRD_PATH.read_text())["spec"]["versions"][0]["schema"]
    spec = schema["openAPIV3Schema"]["properties"]["spec"]
    rules = " ".join(rule["rule"] for rule in spec["x-kubernetes-validations"])
    assert "self.mode == 'Active' || !has(self.rebalance)" in rules
    assert "self.metrics.exists(m, m.name == self.rebalance.trigger.metric)" in rules
    assert "has(m.threshold)" in rules
    trigger = spec["properties"]["rebalance"]["properties"]["trigger"]
    assert trigger["x-kubernetes-validations"][0]["rule"] == "!(has(self.above) && has(self.below))"
    assert "rebalance" not in spec.get("default", {})
    assert "default" not in spec["properties"]["rebalance"]  # off unless written

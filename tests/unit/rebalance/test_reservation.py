"""Target reservations: the room a move's target holds for the evicted pod's replacement.
An arrival of another workload cannot take it, a pod of the reserving workload can (and
its bind consumes the hold); it ends at that bind, when the eviction fails, and after its
bound; the rebalancer's dry runs and explain see it, and the policy's status lists it."""

from __future__ import annotations

import dataclasses
import pathlib

import yaml

from metricsched.core import api_formats, cycle, model, reservation
from metricsched.edges import observe
from metricsched.runtime import cache as cache_mod
from metricsched.runtime import rebalancer as rebalancer_mod
from metricsched.runtime import reservations as reservations_mod
from tests.unit.conftest import NOW, build_node_state, build_pod_info
from tests.unit.runtime import test_rebalancer

GONE = dataclasses.replace(
    build_pod_info("web-abc-1", cpu=800),
    uid="uid-web-1",
    owner="ReplicaSet/web-abc",
    labels={"app": "web", "pod-template-hash": "abc"},
    node_name="hot",
    phase="Running",
)


def replacement() -> model.PodInfo:
    """A new pod of the same Deployment (another ReplicaSet revision, a new name)."""
    return dataclasses.replace(
        build_pod_info("web-def-9", cpu=500),
        uid="uid-web-9",
        owner="ReplicaSet/web-def",
        labels={"app": "web", "pod-template-hash": "def"},
    )


def arrival() -> model.PodInfo:
    return dataclasses.replace(build_pod_info("api-1", cpu=500), uid="uid-api-1")


class Clock:
    def __init__(self) -> None:
        self.mono = 100.0

    def __call__(self) -> float:
        return self.mono


def rig() -> tuple[cache_mod.ClusterCache, reservations_mod.Reservations, Clock]:
    cache = cache_mod.ClusterCache()
    cache.upsert_node(build_node_state("cool", cpu=1000).node)
    clock = Clock()
    held = reservations_mod.Reservations(
        cache=cache, metrics=observe.Metrics(), wall=lambda: NOW, monotonic=clock
    )
    return cache, held, clock


def decide(cache: cache_mod.ClusterCache, pod: model.PodInfo) -> model.Decision:
    snapshot = cache.snapshot(now=NOW)
    return cycle.schedule_one(
        pod=pod,
        snapshot=snapshot,
        table=cache.table(snapshot),
        policies=[],
        metrics={},
        default_fallback=model.FallbackStrategy.LEAST_ALLOCATED,
        now=NOW,
        scheduler_names=frozenset({pod.scheduler_name}),
        rr_counter=0,
        seed=1,
    )


def gauge(held: reservations_mod.Reservations) -> float | None:
    return held.metrics.registry.get_sample_value("metricsched_rebalance_reservations")


# --- what the cycle sees ------------------------------------------------------------------


def test_an_arrival_cannot_take_a_reserved_targets_room():
    cache, held, _ = rig()
    assert decide(cache, arrival()).outcome is model.Outcome.BIND  # without the hold: fits
    assert held.hold(GONE, node="cool", window_s=300)

    decision = decide(cache, arrival())

    assert decision.outcome is model.Outcome.UNSCHEDULABLE
    assert "Insufficient cpu" in decision.message


def test_a_pod_of_the_reserving_workload_takes_the_reserved_room():
    cache, held, _ = rig()
    held.hold(GONE, node="cool", window_s=300)

    decision = decide(cache, replacement())

    assert decision.outcome is model.Outcome.BIND and decision.node == "cool"


def test_the_placeholder_counts_as_a_just_bound_pod_of_its_workload():
    cache, held, _ = rig()
    held.hold(GONE, node="cool", window_s=300)

    (placeholder,) = cache.snapshot(now=NOW).reserved["cool"]
    state = cache.snapshot(now=NOW).nodes[model.NodeName("cool")]

    assert placeholder in state.pods and placeholder.bound_at == NOW
    assert placeholder.usage_workload == replacement().usage_workload == "shop/Deployment/web"
    assert state.requested.milli_cpu == 800
    # it keeps room only: no labels another pod's affinity could match, no ports, not ours
    assert dict(placeholder.labels) == {"pod-template-hash": "abc"}
    assert placeholder.placed_by == "" and placeholder.host_ports == ()


# --- when a hold ends ---------------------------------------------------------------------


def test_the_replacements_bind_consumes_the_hold():
    cache, held, _ = rig()
    held.hold(GONE, node="cool", window_s=300)
    assert gauge(held) == 1

    held.consume(replacement(), "cool")

    assert len(held) == 0 and gauge(held) == 0
    assert cache.snapshot(now=NOW).reserved == {}
    assert decide(cache, arrival()).outcome is model.Outcome.BIND


def test_a_replacement_bound_elsewhere_drops_the_hold():
    cache, held, _ = rig()
    held.hold(GONE, node="cool", window_s=300)

    held.consume(replacement(), "other")

    assert len(held) == 0 and decide(cache, arrival()).outcome is model.Outcome.BIND


def test_another_workloads_bind_leaves_the_hold():
    _cache, held, _ = rig()
    held.hold(GONE, node="cool", window_s=300)

    held.consume(arrival(), "cool")

    assert len(held) == 1


def test_a_hold_ends_after_its_bound_or_the_window_if_shorter():
    cache, held, clock = rig()
    held.hold(GONE, node="cool", window_s=300)
    clock.mono += reservations_mod.BOUND_S - 1
    assert held.expire() == 0 and len(held) == 1
    clock.mono += 1
    assert held.expire() == 1
    assert decide(cache, arrival()).outcome is model.Outcome.BIND

    held.hold(GONE, node="cool", window_s=20)
    clock.mono += 20
    assert held.expire() == 1


def test_a_failed_eviction_releases_the_hold():
    cache, held, _ = rig()
    held.hold(GONE, node="cool", window_s=300)

    held.release(GONE.uid)

    assert len(held) == 0 and decide(cache, arrival()).outcome is model.Outcome.BIND


def test_a_hold_on_a_node_that_is_gone_holds_nothing():
    _cache, held, _ = rig()
    assert not held.hold(GONE, node="nowhere", window_s=300)
    assert len(held) == 0


def test_a_placeholder_is_never_a_ghost_of_a_list():
    cache, held, _ = rig()
    held.hold(GONE, node="cool", window_s=300)

    assert cache.bound_ghosts(set(), list_version="10", started=0.0) == []


def test_explain_names_the_held_room():
    cache, held, _ = rig()
    held.hold(GONE, node="cool", window_s=300)

    (placeholder,) = cache.snapshot(now=NOW).reserved["cool"]

    assert reservation.describe((placeholder,)) == (
        "room held for the replacement of a rebalanced pod: shop/Deployment/web "
        "(cpu 800m, memory 128Mi)"
    )


# --- the rebalancer holds, and its dry runs see holds --------------------------------------


def rebalancing_rig(
    *, status: int = 201
) -> tuple[test_rebalancer.Rig, reservations_mod.Reservations]:
    spec = dataclasses.replace(test_rebalancer.SPEC, mode=model.RebalanceMode.EVICT)
    found = test_rebalancer.Rig(spec)
    found.api.status = status
    held = reservations_mod.Reservations(
        cache=found.cache,
        metrics=found.metrics,
        wall=lambda: found.now,
        monotonic=lambda: found.mono,
    )
    found.rebalancer.reservations = held
    return found, held


def test_an_accepted_move_holds_its_target_for_the_replacement():
    found, held = rebalancing_rig()
    found.run(NOW)
    assert found.run(NOW + 60) == 1

    (hold,) = held.holds()
    assert (hold.node, hold.workload) == ("cool", found.pod.usage_workload)
    assert found.cache.snapshot(now=NOW).reserved["cool"] == (hold.placeholder,)


def test_a_refused_eviction_holds_nothing():
    found, held = rebalancing_rig(status=429)
    found.run(NOW)
    found.run(NOW + 60)

    assert found.api.evicted == ["shop/web-1"] and len(held) == 0
    assert found.cache.snapshot(now=NOW).reserved == {}


def test_the_dry_run_does_not_move_a_pod_into_room_held_for_another():
    found, held = rebalancing_rig()
    for k in range(5):  # 5 x 800m: cool's 4000m held for another workload's replacements
        other = dataclasses.replace(GONE, uid=f"uid-other-{k}", owner="StatefulSet/db")
        assert held.hold(other, node="cool", window_s=300)
    found.run(NOW)

    assert found.run(NOW + 60) == 0
    assert found.api.evicted == []


# --- status.rebalance.held: the room each policy's moves hold ------------------------------


def held_block(found: test_rebalancer.Rig) -> list[dict[str, object]]:
    block = found.rebalancer.status_block(model.PolicyKey("shop/web-latency"))
    assert block is not None
    return block["held"]  # type: ignore[return-value]


def test_the_status_lists_the_room_a_move_holds_by_node_owner_amount_and_until():
    found, _held = rebalancing_rig()
    found.rebalancer._clock = lambda: found.now  # the status's wall times
    found.run(NOW)
    found.run(NOW + 60)

    assert held_block(found) == [
        {
            "node": "cool",
            "owner": found.pod.usage_workload,
            "amount": {"cpu": "100m", "memory": "128Mi"},
            # the bound: the policy's window (60 s), shorter than BOUND_S
            "until": api_formats.rfc3339(NOW + 60 + 60),
        }
    ]


def test_a_refused_eviction_shows_no_held_room():
    found, _held = rebalancing_rig(status=429)
    found.run(NOW)
    found.run(NOW + 60)

    assert held_block(found) == []


def test_held_room_the_replacement_took_leaves_the_status_and_the_policy_is_rewritten():
    def marks_at_the_next_pass(*, bound: bool) -> tuple[int, list[dict[str, object]]]:
        found, held = rebalancing_rig()
        found.run(NOW)
        found.run(NOW + 60)
        if bound:
            held.consume(dataclasses.replace(found.pod, uid="uid-new"), "cool")
        found.marked.clear()
        found.run(NOW + 61)
        return len(found.marked), held_block(found)

    marks, listed = marks_at_the_next_pass(bound=True)
    unchanged, still = marks_at_the_next_pass(bound=False)
    assert listed == [] and len(still) == 1
    assert marks == unchanged + 1  # the status is rewritten for the change, once


def test_room_held_by_another_policys_move_is_not_listed():
    found, held = rebalancing_rig()
    assert held.hold(GONE, node="cool", window_s=300)  # not this policy's move
    found.run(NOW)

    assert held_block(found) == []


def test_the_held_list_fits_the_crds_status_rebalance_schema():
    found, _held = rebalancing_rig()
    found.run(NOW)
    found.run(NOW + 60)
    crd = yaml.safe_load(
        (pathlib.Path(__file__).resolve().parents[3] / "crds" / "schedulingpolicy.yaml").read_text()
    )
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"][
        "properties"
    ]["rebalance"]["properties"]["held"]
    entries = held_block(found)
    assert entries and len(entries) <= schema["maxItems"]
    assert schema["maxItems"] == rebalancer_mod.HELD
    for entry in entries:
        assert set(entry) <= set(schema["items"]["properties"])
        amount = entry["amount"]
        assert isinstance(amount, dict)
        assert set(amount) <= set(schema["items"]["properties"]["amount"]["properties"])

"""NodeResourcesFit LeastAllocated: the emptier node scores higher (hand-computed)."""

from __future__ import annotations

from metricsched.core import parse
from metricsched.core.plugins import node_resources_fit
from tests.unit.conftest import build_pod_body
from tests.unit.kube_scores.conftest import table_scores


def test_least_allocated_is_the_mean_of_free_cpu_and_memory_percentages(node, pod, snapshot):
    placed = pod("placed", node_name="small", cpu="1", memory="4Gi")
    scene = snapshot(
        [node("small", cpu="4", memory="16Gi"), node("big", cpu="8", memory="32Gi")], [placed]
    )
    incoming = pod(cpu="1", memory="4Gi")
    # big: (8000-1000)*100//8000 = 87, (32-4)*100//32 = 87; small: 2000/4000 = 50, 8/16 = 50.
    assert table_scores(node_resources_fit.scoring, incoming, scene) == (87.0, 50.0)


def test_containers_without_requests_count_100m_and_200mi(node, pod, snapshot):
    scene = snapshot([node("n1", cpu="4", memory="16Gi")])
    bare = pod(containers=[{"name": "app", "image": "app:1"}])
    # cpu (4000-100)*100//4000 = 97, memory (16384-200)*100//16384 = 98; (97+98)//2 = 97.
    assert table_scores(node_resources_fit.scoring, bare, scene) == (97.0,)


def test_a_request_over_the_free_room_scores_zero_for_that_resource(node, pod, snapshot):
    scene = snapshot([node("n1", cpu="1", memory="16Gi")])
    # cpu 2000 > 1000: 0; memory (16-1)*100//16 = 93; (0+93)//2 = 46.
    assert table_scores(node_resources_fit.scoring, pod(cpu="2", memory="1Gi"), scene) == (46.0,)


def test_a_resource_the_node_has_none_of_is_left_out_of_the_mean(node, pod, snapshot):
    # No cpu allocatable: kube-scheduler scores memory alone, (16-1)*100//16 = 93, rather
    # than averaging it with 0.
    scene = snapshot([node("n1", cpu="0", memory="16Gi")])
    assert table_scores(node_resources_fit.scoring, pod(cpu="0", memory="1Gi"), scene) == (93.0,)


def test_an_explicit_zero_request_counts_zero(node, pod, snapshot):
    scene = snapshot([node("n1", cpu="1", memory="1Gi")])
    # cpu 0 asked explicitly: 100 (not the 100m default: 90); memory (1024-64)*100//1024 = 93.
    assert table_scores(node_resources_fit.scoring, pod(cpu="0", memory="64Mi"), scene) == (96.0,)


def test_the_incoming_pods_pod_level_requests_do_not_count_but_placed_pods_do(node, pod, snapshot):
    placed_body = build_pod_body("placed", node_name="n1", containers=[{"name": "c"}])
    placed_body["spec"]["resources"] = {"requests": {"cpu": "2", "memory": "4Gi"}}
    incoming_body = build_pod_body("incoming", containers=[{"name": "c"}])
    incoming_body["spec"]["resources"] = {"requests": {"cpu": "2", "memory": "4Gi"}}
    scene = snapshot([node("n1", cpu="8", memory="16Gi")], [parse.pod_from_body(placed_body)])
    # On the node 2 cpu / 4Gi (pod-level); the incoming pod 100m / 200Mi (its container):
    # cpu (8000-2100)*100//8000 = 73, memory (16384-4096-200)*100//16384 = 73.
    scores = table_scores(node_resources_fit.scoring, parse.pod_from_body(incoming_body), scene)
    assert scores == (73.0,)

"""NodeResourcesFit LeastAllocated: the emptier node scores higher (hand-computed)."""

from __future__ import annotations

from metricsched.core.plugins.kube_scores import node_resources_fit
from tests.unit.kube_scores.conftest import table_scores


def test_least_allocated_is_the_mean_of_free_cpu_and_memory_percentages(node, pod, snapshot):
    placed = pod("placed", node_name="small", cpu="1", memory="4Gi")
    scene = snapshot(
        [node("small", cpu="4", memory="16Gi"), node("big", cpu="8", memory="32Gi")], [placed]
    )
    incoming = pod(cpu="1", memory="4Gi")
    # big: (8000-1000)*100//8000 = 87, (32-4)*100//32 = 87; small: 2000/4000 = 50, 8/16 = 50.
    assert table_scores(node_resources_fit, incoming, scene) == (87.0, 50.0)


def test_containers_without_requests_count_100m_and_200mi(node, pod, snapshot):
    scene = snapshot([node("n1", cpu="4", memory="16Gi")])
    bare = pod(containers=[{"name": "app", "image": "app:1"}])
    # cpu (4000-100)*100//4000 = 97, memory (16384-200)*100//16384 = 98; (97+98)//2 = 97.
    assert table_scores(node_resources_fit, bare, scene) == (97.0,)


def test_a_request_over_the_free_room_scores_zero_for_that_resource(node, pod, snapshot):
    scene = snapshot([node("n1", cpu="1", memory="16Gi")])
    # cpu 2000 > 1000: 0; memory (16-1)*100//16 = 93; (0+93)//2 = 46.
    assert table_scores(node_resources_fit, pod(cpu="2", memory="1Gi"), scene) == (46.0,)

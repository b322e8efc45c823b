"""PodScheduled=False is patched like kube-scheduler does, and only when it changes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import edges_fakes as fakes

from metricsched.edges import kube_http, observe, pod_status

MESSAGE = "0/3 nodes are available: 3 Insufficient cpu."
NOW = 1_767_225_600.0  # 2026-01-01T00:00:00Z


def set_false(
    run: fakes.Runner,
    api: kube_http.AsyncApi,
    current: Sequence[Mapping[str, object]],
    **overrides: object,
) -> pod_status.StatusWrite:
    args: dict[str, object] = {
        "namespace": "shop",
        "name": "web-7d4",
        "message": MESSAGE,
        "current_conditions": current,
        "now": NOW,
        **overrides,
    }
    return run(pod_status.set_pod_scheduled_false(api, **args))  # type: ignore[arg-type]


def test_the_condition_is_sent_as_a_strategic_merge_patch_of_pod_status(
    fake_kube: fakes.FakeServer, run: fakes.Runner, writes_api: kube_http.AsyncApi
) -> None:
    assert set_false(run, writes_api, []) is pod_status.StatusWrite.WRITTEN
    (request,) = fake_kube.requests
    assert (request.method, request.path) == (
        "PATCH",
        "/api/v1/namespaces/shop/pods/web-7d4/status",
    )
    assert request.headers["content-type"] == "application/strategic-merge-patch+json"
    assert request.json() == {
        "status": {
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": MESSAGE,
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
            ]
        }
    }


def test_an_identical_condition_is_not_written_again(
    fake_kube: fakes.FakeServer, run: fakes.Runner, writes_api: kube_http.AsyncApi
) -> None:
    current = [
        {"type": "Initialized", "status": "True"},
        {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": MESSAGE,
            "lastTransitionTime": "2025-12-31T23:00:00Z",
        },
    ]
    assert set_false(run, writes_api, current) is pod_status.StatusWrite.UNCHANGED
    assert fake_kube.requests == []


def test_a_new_message_keeps_the_transition_time_of_the_unchanged_status(
    fake_kube: fakes.FakeServer, run: fakes.Runner, writes_api: kube_http.AsyncApi
) -> None:
    current = [
        {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": "0/3 nodes are available: 3 Insufficient memory.",
            "lastTransitionTime": "2025-12-31T23:00:00Z",
        }
    ]
    assert set_false(run, writes_api, current) is pod_status.StatusWrite.WRITTEN
    (condition,) = fake_kube.requests[0].json()["status"]["conditions"]
    assert condition["message"] == MESSAGE
    assert condition["lastTransitionTime"] == "2025-12-31T23:00:00Z"


def test_a_long_message_is_truncated_like_kube_scheduler(
    fake_kube: fakes.FakeServer, run: fakes.Runner, writes_api: kube_http.AsyncApi
) -> None:
    set_false(run, writes_api, [], message="x" * 2000)
    (condition,) = fake_kube.requests[0].json()["status"]["conditions"]
    assert len(condition["message"]) == 1024
    assert condition["message"].endswith("x ...")


def test_a_deleted_pod_is_gone_and_other_errors_do_not_raise(
    fake_kube: fakes.FakeServer, run: fakes.Runner, writes_api: kube_http.AsyncApi
) -> None:
    fake_kube.responder = lambda r: (404, fakes.status_body(404, "NotFound", "pods not found"))
    assert set_false(run, writes_api, []) is pod_status.StatusWrite.GONE
    fake_kube.responder = lambda r: (500, fakes.status_body(500, "InternalError", "etcd down"))
    assert set_false(run, writes_api, []) is pod_status.StatusWrite.ERROR


def test_status_writes_are_counted(run: fakes.Runner, writes_api: kube_http.AsyncApi) -> None:
    metrics = observe.Metrics()
    set_false(run, writes_api, [], metrics=metrics)
    assert (
        metrics.registry.get_sample_value("metricsched_api_writes_total", {"kind": "status"}) == 1
    )

"""The profile's buckets are named after what they measure: a stack goes to the activity
on its callers (the informer's parsing to the informer, Event posts to the recorder, the
kopf pod handlers by name), and only stacks with none of our frames count as plumbing."""

from __future__ import annotations

from pathlib import Path

from bench import profiling

OP = "/src/operator/metricsched"
PY = "/usr/lib/python3.11"
SITE = "/venv/lib/python3.11/site-packages"
# The roots of every stack of the operator: its console script, cli.main, the loop.
LOOP = [
    "<module> (/venv/bin/metricsched:8)",
    f"main ({OP}/cli.py:210)",
    f"run ({PY}/asyncio/runners.py:118)",
    f"_run_once ({PY}/asyncio/base_events.py:1922)",
]


def _bucket(*frames: str) -> str:
    return profiling.category([*LOOP, *frames])


def test_informer_parsing_is_the_informers_not_the_cycles() -> None:
    bucket = _bucket(
        f"_watch ({OP}/edges/informer.py:250)",
        f"upsert_pod ({OP}/runtime/informers.py:200)",
        f"pod_from_body ({OP}/core/parse.py:310)",
    )
    assert bucket.startswith("informer")


def test_the_cycle_is_schedule_one_and_what_it_calls() -> None:
    bucket = _bucket(
        f"run ({OP}/runtime/scheduler.py:140)",
        f"_attempt ({OP}/runtime/scheduler.py:200)",
        f"schedule_one ({OP}/core/cycle.py:90)",
        f"score ({OP}/core/scoring.py:40)",
    )
    assert bucket.startswith("the cycle")


def test_a_class_runs_decisions_are_the_cycle() -> None:
    bucket = _bucket(
        f"_attempt ({OP}/runtime/scheduler.py:200)",
        f"decide ({OP}/core/class_run.py:120)",
        f"fits ({OP}/core/filters.py:40)",
    )
    assert bucket.startswith("the cycle")


def test_the_attempt_around_the_cycle_is_apart_from_it() -> None:
    bucket = _bucket(
        f"_attempt ({OP}/runtime/scheduler.py:200)",
        f"snapshot ({OP}/runtime/cache.py:400)",
    )
    assert bucket.startswith("attempt outside the cycle")


def test_event_posts_are_the_event_recorders() -> None:
    bucket = _bucket(
        f"_write ({OP}/edges/events.py:380)",
        f"_send ({OP}/edges/events.py:499)",
        f"request ({OP}/edges/kube_http.py:300)",
        f"_request ({SITE}/aiohttp/client.py:700)",
    )
    assert bucket.startswith("event recorder")


def test_binding_posts_are_the_binders() -> None:
    bucket = _bucket(
        f"_bind ({OP}/runtime/scheduler.py:325)",
        f"bind ({OP}/edges/binder.py:120)",
        f"_request ({SITE}/aiohttp/client.py:700)",
    )
    assert bucket.startswith("Binding POST")


def test_kopf_pod_handlers_are_matched_by_name() -> None:
    for handler in ("on_pending_pod", "on_bound_pod"):
        bucket = _bucket(
            f"process_resource_event ({SITE}/kopf/_core/reactor/processing.py:60)",
            f"{handler} ({OP}/runtime/ingest.py:150)",
            f"pod_from_body ({OP}/core/parse.py:310)",
        )
        assert bucket.startswith("kopf pod handlers"), handler


def test_kopf_without_our_handler_is_kopfs_machinery() -> None:
    bucket = _bucket(
        f"worker ({SITE}/kopf/_core/reactor/queueing.py:300)",
        f"raw_decode ({PY}/json/decoder.py:353)",
    )
    assert bucket.startswith("kopf machinery")


def test_queue_refresher_and_logging_are_not_plumbing() -> None:
    assert _bucket(f"pop ({OP}/runtime/queue.py:80)").startswith("queue")
    assert _bucket(
        f"_round ({OP}/runtime/refresher.py:120)",
        f"query ({OP}/edges/prometheus_http.py:90)",
        f"_request ({SITE}/aiohttp/client.py:700)",
    ).startswith("metric refresher")
    assert _bucket(f"emit ({PY}/logging/__init__.py:1100)").startswith("logging")
    assert _bucket(f"inc ({SITE}/prometheus_client/metrics.py:300)").startswith("prometheus_client")


def test_only_stacks_without_our_frames_are_plumbing() -> None:
    assert _bucket(f"select ({PY}/selectors.py:468)").startswith("event loop")
    assert _bucket(f"data_received ({SITE}/aiohttp/client_proto.py:300)").startswith("event loop")
    assert profiling.category(["<module> (weird.py:1)"]) == "other"


def test_imports_below_the_entry_script_are_imports() -> None:
    bucket = profiling.category(
        [
            "<module> (/venv/bin/metricsched:8)",
            f"<module> ({OP}/cli.py:3)",
            f"<module> ({OP}/core/model.py:1)",
            f"_create_fn ({PY}/dataclasses.py:433)",
        ]
    )
    assert bucket.startswith("imports")


def test_summary_shares_by_bucket(tmp_path: Path) -> None:
    raw = tmp_path / "raw.txt"
    cycle = ";".join([*LOOP, f"schedule_one ({OP}/core/cycle.py:90)"])
    parse = ";".join([*LOOP, f"_watch ({OP}/edges/informer.py:250)"])
    raw.write_text(f"{cycle} 30\n{parse} 10\n")
    summary = profiling.summarise(raw, seconds=1.0)
    shares = dict(summary["category_pct"])
    assert summary["samples"] == 40
    (cycle_name,) = [name for name, _ in profiling.CATEGORIES if name.startswith("the cycle")]
    assert shares[cycle_name] == 75.0
    assert sum(shares.values()) == 100.0

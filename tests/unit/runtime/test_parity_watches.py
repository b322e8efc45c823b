"""Namespaces (labels only), claims and volumes are watched; the snapshot carries them."""

from __future__ import annotations

from metricsched.runtime import cache as cache_mod
from tests.unit.runtime.test_watches_and_relist import _watches


def _namespace(name: str, **labels: str) -> dict[str, object]:
    return {"metadata": {"name": name, "labels": labels, "annotations": {"big": "x" * 100}}}


def test_snapshot_has_no_namespace_labels_until_the_watch_delivers():
    assert cache_mod.ClusterCache().snapshot(now=0).namespace_labels is None


def test_namespace_events_keep_each_namespaces_labels():
    watches = _watches()
    watches.on_namespace(None, _namespace("shop", team="web"))
    watches.on_namespace("ADDED", _namespace("data", team="data"))
    watches.on_namespace("MODIFIED", _namespace("shop", team="web", tier="front"))
    watches.on_namespace("DELETED", _namespace("data"))
    assert watches.cache.snapshot(now=0).namespace_labels == {
        "shop": {"team": "web", "tier": "front"}
    }


def test_a_label_change_can_make_a_pending_pod_schedulable():
    watches = _watches()
    watches.on_namespace("ADDED", _namespace("shop", team="web"))
    before = watches.cache.generation
    watches.on_namespace("MODIFIED", _namespace("shop", team="web"))  # unchanged labels
    assert watches.cache.generation == before
    watches.on_namespace("MODIFIED", _namespace("shop", team="data"))
    assert watches.cache.generation > before


def test_claim_and_volume_events_reach_the_snapshot_and_wake_pending_pods():
    watches = _watches()
    claim = {"metadata": {"name": "data", "namespace": "shop"}, "spec": {}}
    watches.on_claim("ADDED", claim)
    before = watches.cache.generation
    watches.on_claim("MODIFIED", {**claim, "spec": {"volumeName": "pv-1"}})
    watches.on_volume("ADDED", {"metadata": {"name": "pv-1"}, "spec": {}})
    assert watches.cache.generation > before
    snapshot = watches.cache.snapshot(now=0)
    assert snapshot.claims is not None and snapshot.claims["shop/data"].volume_name == "pv-1"
    assert snapshot.volumes is not None and "pv-1" in snapshot.volumes
    watches.on_claim("DELETED", claim)
    watches.on_volume("DELETED", {"metadata": {"name": "pv-1"}})
    snapshot = watches.cache.snapshot(now=0)
    assert snapshot.claims == {} and snapshot.volumes == {}


def test_storage_class_events_reach_the_snapshot_and_wake_pending_pods():
    watches = _watches()
    body = {"metadata": {"name": "local"}, "provisioner": "p", "volumeBindingMode": "Immediate"}
    watches.on_storage_class("ADDED", body)
    before = watches.cache.generation
    watches.on_storage_class("MODIFIED", body)  # unchanged
    assert watches.cache.generation == before
    watches.on_storage_class("MODIFIED", {**body, "volumeBindingMode": "WaitForFirstConsumer"})
    assert watches.cache.generation > before
    classes = watches.cache.snapshot(now=0).storage_classes
    assert classes is not None and classes["local"].wait_for_first_consumer
    watches.on_storage_class("DELETED", body)
    assert watches.cache.snapshot(now=0).storage_classes == {}


def test_a_csi_node_that_cannot_be_read_is_ignored_not_fatal():
    watches = _watches()
    watches.on_csi_node("ADDED", {"metadata": {"name": "node-1"}, "spec": {"drivers": "x"}})
    assert watches.cache.snapshot(now=0).csi_nodes == {}

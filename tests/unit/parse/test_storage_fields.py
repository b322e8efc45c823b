"""Claims, volumes, StorageClasses and CSINodes are read as VolumeBinding and NodeVolumeLimits
read them."""

from __future__ import annotations

import pytest

from metricsched.core import parse


def test_a_claims_class_is_the_beta_annotation_before_the_spec_field():
    spec = {"storageClassName": "fast"}
    assert parse.claim_from_body({"metadata": {"name": "a"}, "spec": spec}).storage_class == "fast"
    annotated = {
        "metadata": {
            "name": "a",
            "annotations": {"volume.beta.kubernetes.io/storage-class": "old"},
        },
        "spec": spec,
    }
    assert parse.claim_from_body(annotated).storage_class == "old"
    assert parse.claim_from_body({"metadata": {"name": "a"}}).storage_class == ""


def test_a_claim_is_bound_once_the_pv_controller_marks_it_and_lost_when_its_phase_says_so():
    prebound = parse.claim_from_body({"metadata": {"name": "a"}, "spec": {"volumeName": "pv-1"}})
    assert (prebound.volume_name, prebound.bind_completed, prebound.lost) == ("pv-1", False, False)
    bound = parse.claim_from_body(
        {
            "metadata": {"name": "a", "annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
            "spec": {"volumeName": "pv-1"},
            "status": {"phase": "Lost"},
        }
    )
    assert (bound.bind_completed, bound.lost) == (True, True)


def test_a_csi_volume_is_read_with_its_driver_and_handle():
    volume = parse.volume_from_body(
        {"metadata": {"name": "pv-1"}, "spec": {"csi": {"driver": "d", "volumeHandle": "h"}}}
    )
    assert (volume.csi_driver, volume.csi_handle) == ("d", "h")
    local = parse.volume_from_body({"metadata": {"name": "pv-2"}, "spec": {"local": {"path": "/"}}})
    assert (local.csi_driver, local.csi_handle) == ("", "")


def test_a_storage_class_is_wait_for_first_consumer_only_when_it_says_so():
    wffc = parse.storage_class_from_body(
        {
            "metadata": {"name": "local"},
            "provisioner": "p",
            "volumeBindingMode": "WaitForFirstConsumer",
        }
    )
    assert (wffc.name, wffc.provisioner, wffc.wait_for_first_consumer) == ("local", "p", True)
    for mode in ({"volumeBindingMode": "Immediate"}, {}):
        body = {"metadata": {"name": "fast"}, "provisioner": "p", **mode}
        assert not parse.storage_class_from_body(body).wait_for_first_consumer


def test_a_csi_node_keeps_the_count_of_each_driver_that_has_one():
    csi_node = parse.csi_node_from_body(
        {
            "metadata": {"name": "node-1"},
            "spec": {
                "drivers": [
                    {"name": "a", "nodeID": "n", "allocatable": {"count": 0}},
                    {"name": "b", "nodeID": "n", "allocatable": {}},
                    {"name": "c", "nodeID": "n"},
                ]
            },
        }
    )
    assert (csi_node.name, dict(csi_node.limits)) == ("node-1", {"a": 0})


def test_a_malformed_csi_node_names_the_field():
    with pytest.raises(parse.ParseError, match=r"spec\.drivers\[0\]"):
        parse.csi_node_from_body({"metadata": {"name": "n"}, "spec": {"drivers": ["x"]}})


def test_a_pods_generic_ephemeral_claims_are_named_after_the_pod_and_told_apart():
    info = parse.pod_from_body(
        {
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {
                "containers": [{"name": "c"}],
                "volumes": [
                    {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
                    {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
                ],
            },
        }
    )
    assert (info.volume_claims, info.ephemeral_claims) == (
        ("data", "web-scratch"),
        ("web-scratch",),
    )


def test_a_claims_controller_is_its_controlling_owner():
    owners = [
        {"kind": "X", "name": "x", "uid": "uid-x"},
        {"kind": "Pod", "name": "web", "uid": "uid-web", "controller": True},
    ]
    body = {"metadata": {"name": "web-scratch", "ownerReferences": owners}}
    assert parse.claim_from_body(body).controller_uid == "uid-web"
    assert parse.claim_from_body({"metadata": {"name": "a"}}).controller_uid == ""


def test_a_volume_attachment_is_read_with_its_driver_node_and_volume():
    attachment = parse.volume_attachment_from_body(
        {
            "metadata": {"name": "csi-1"},
            "spec": {"attacher": "d", "nodeName": "n", "source": {"persistentVolumeName": "pv"}},
        }
    )
    assert (attachment.attacher, attachment.node_name, attachment.volume_name) == ("d", "n", "pv")
    inline = {"metadata": {"name": "csi-2"}, "spec": {"source": {"inlineVolumeSpec": {}}}}
    assert parse.volume_attachment_from_body(inline).volume_name == ""

"""The test bed's exporter (hack/exporter.py) serves DCGM_FI_* fields as dcgm-exporter
does: labelled by the node's name in Hostname, one GPU each, without node or instance."""

from __future__ import annotations

import prometheus_client

from tests.unit.load_model.conftest import _load

exporter = _load("hack_exporter", "exporter.py")


def test_dcgm_fields_carry_hostname_gpu_and_uuid_and_no_node_label(tmp_path):
    state = exporter.State(tmp_path / "state.json", 2)
    state.values["DCGM_FI_DEV_GPU_TEMP"] = {"node-1": 61.0}
    registry = prometheus_client.CollectorRegistry(auto_describe=False)
    registry.register(exporter.Collector(state))
    text = prometheus_client.generate_latest(registry).decode()
    [line] = [x for x in text.splitlines() if x.startswith("DCGM_FI_DEV_GPU_TEMP{")]
    assert 'Hostname="node-1"' in line and 'gpu="0"' in line and 'UUID="GPU-' in line
    assert 'node="' not in line and "instance=" not in line
    assert line.endswith(" 61.0")
    # The simulator's own gauges keep their node and instance labels.
    assert 'node_latency_seconds{instance="10.240.0.2:9100",node="node-1"}' in text


def test_several_gpus_of_one_node_are_one_series_each_with_their_own_uuid(tmp_path):
    state = exporter.State(tmp_path / "state.json", 2)
    state.values["DCGM_FI_DEV_GPU_UTIL"] = {"node-1/0": 10.0, "node-1/1": 90.0, "node-2": 5.0}
    registry = prometheus_client.CollectorRegistry(auto_describe=False)
    registry.register(exporter.Collector(state))
    text = prometheus_client.generate_latest(registry).decode()
    lines = [x for x in text.splitlines() if x.startswith("DCGM_FI_DEV_GPU_UTIL{")]
    by_gpu = {
        (x.split('Hostname="')[1].split('"')[0], x.split('gpu="')[1].split('"')[0]): x
        for x in lines
    }
    assert set(by_gpu) == {("node-1", "0"), ("node-1", "1"), ("node-2", "0")}
    assert by_gpu["node-1", "1"].endswith(" 90.0") and 'device="nvidia1"' in by_gpu["node-1", "1"]
    uuids = {x.split('UUID="')[1].split('"')[0] for x in lines}
    assert len(uuids) == 3

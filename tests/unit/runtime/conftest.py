"""Fixtures the runtime's tests share."""

from __future__ import annotations

import argparse

import kubernetes.client
import pytest

from metricsched import config as config_mod
from metricsched.runtime import operator as operator_mod


@pytest.fixture
def op() -> operator_mod.Operator:
    """An Operator on the default configuration, nothing started (no I/O until run)."""
    parser = argparse.ArgumentParser()
    config_mod.add_run_arguments(parser)
    return operator_mod.Operator(
        config_mod.from_args(parser.parse_args([]), {}),
        kubernetes.client.ApiClient(kubernetes.client.Configuration()),
    )

"""The generator's extras for versions after v1.35 (tests/parity/extras.py)."""

from __future__ import annotations

import pytest

from tests.parity import extras, oracle

pytestmark = pytest.mark.parity


def test_v1_35_is_asked_about_the_base_scenarios_only() -> None:
    assert extras.Options.for_version("v1.35.4") == extras.NONE
    assert not extras.NONE.any


def test_v1_37_gets_nominations_declared_features_and_dra_extended_resources() -> None:
    options = extras.Options.for_version("v1.37.2")
    assert options.nominated and options.declared_features and options.dra_extended_resources
    made = [scenario for _, scenario in oracle.scenarios(pods=400, seed=3, options=options)]
    assert any(scenario.get("nominated") for scenario in made)
    assert any(scenario.get("deviceClasses") for scenario in made)
    assert any(
        "declaredFeatures" in node["status"] for scenario in made for node in scenario["nodes"]
    )
    assert any(
        extras.DRA_RESOURCE in str(pod["spec"]) for scenario in made for pod in scenario["incoming"]
    )
    for scenario in made:
        for pod in scenario.get("nominated", ()):
            assert pod["status"]["nominatedNodeName"] and "nodeName" not in pod["spec"]


def test_extras_leave_the_rest_of_a_scenario_as_the_seed_made_it() -> None:
    options = extras.Options.for_version("v1.37.2")
    base = dict(oracle.scenarios(pods=80, seed=5))
    extended = dict(oracle.scenarios(pods=80, seed=5, options=options))
    for index, scenario in base.items():
        other = extended[index]
        assert [n["metadata"] for n in other["nodes"]] == [n["metadata"] for n in scenario["nodes"]]
        assert other["pods"] == scenario["pods"]
        assert [p["metadata"]["name"] for p in other["incoming"]] == [
            p["metadata"]["name"] for p in scenario["incoming"]
        ]

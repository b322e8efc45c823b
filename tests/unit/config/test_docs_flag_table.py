"""docs/operating.md's flag table is made from config.FLAGS, the table argparse and the
environment lookup are made from: a flag, variable or default changed in one place shows up
in the docs, or this fails."""

from __future__ import annotations

import argparse
import dataclasses
import re
import subprocess
import sys
from pathlib import Path

import pytest

from metricsched import config as config_mod

ROOT = Path(__file__).parents[3]
OPERATING = ROOT / "docs" / "operating.md"


def test_the_committed_flag_table_is_the_one_the_flags_make() -> None:
    text = OPERATING.read_text(encoding="utf-8")
    assert config_mod.with_docs_table(text) == text, (
        "docs/operating.md's flag table is stale: run "
        "`.venv/bin/python -m metricsched.config --write docs/operating.md`"
    )


def test_a_flag_whose_words_change_makes_the_committed_table_stale(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    text = OPERATING.read_text(encoding="utf-8")
    changed = tuple(
        dataclasses.replace(f, default="9090") if f.flag == "--metrics-port" else f
        for f in config_mod.FLAGS
    )
    monkeypatch.setattr(config_mod, "FLAGS", changed)
    assert "`9090` / `8081`" in config_mod.with_docs_table(text)
    assert config_mod.with_docs_table(text) != text


def test_every_flag_and_variable_has_its_row() -> None:
    table = config_mod.docs_table()
    for f in config_mod.FLAGS:
        assert f"`{f.flag}" in table
        row = next(line for line in table.splitlines() if f"`{f.flag}" in line)
        named = re.findall(r"`((?:METRICSCHED|\.\.\.)_[A-Z_]+)`", row)
        assert any(f.variable.endswith(v.removeprefix("...")) for v in named), row


def test_joined_rows_name_the_shared_words_of_their_variables_once() -> None:
    table = config_mod.docs_table()
    assert (
        "| `--metrics-port` / `--health-port` | `METRICSCHED_METRICS_PORT` / "
        "`..._HEALTH_PORT` | `8080` / `8081` |" in table
    )
    assert "`METRICSCHED_LEADER_ELECTION_NAMESPACE` / `..._ID`" in table
    assert "`METRICSCHED_PROMETHEUS_USERNAME` / `..._PASSWORD_FILE`" in table


def test_the_help_names_each_flag_s_variable_and_its_default() -> None:
    parser = argparse.ArgumentParser()
    config_mod.add_run_arguments(parser)
    helps = {a.option_strings[0]: a.help or "" for a in parser._actions if a.dest != "help"}
    for f in config_mod.FLAGS:
        assert f"[{f.variable}" in helps[f.flag]
        assert "{default}" not in helps[f.flag]
    assert "(default: 8080)" in helps["--metrics-port"]
    assert "(default: 8Mi)" in helps["--max-result-bytes"]


def test_each_flag_sets_a_field_of_its_own_name_or_is_read_by_from_args() -> None:
    # Every record is read: from_args asks for each flag by its argparse name.
    source = Path(config_mod.__file__).read_text(encoding="utf-8")
    body = source[source.index("def from_args") :]
    for f in config_mod.FLAGS:
        assert f'"{f.attr}"' in body, f"{f.flag} is declared but never read"


def test_the_module_prints_the_table() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "metricsched.config", "--docs-table"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    assert out == config_mod.docs_table()

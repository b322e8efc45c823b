"""The load model reads a paged LIST whole: every page's items, the first page's version."""

from __future__ import annotations

import json
from typing import Any

from tests.unit.load_model.conftest import loadmodel


class _Raw:
    def __init__(self, body: dict[str, Any]) -> None:
        self.data = json.dumps(body).encode()

    def release_conn(self) -> None:
        pass


def _pages(*pages: list[str]) -> tuple[list[str | None], Any]:
    asked: list[str | None] = []

    def fetch(cont: str | None) -> _Raw:
        asked.append(cont)
        index = int(cont or 0)
        more = str(index + 1) if index + 1 < len(pages) else None
        return _Raw(
            {
                "metadata": {"resourceVersion": f"rv-{index}", "continue": more},
                "items": [{"metadata": {"name": name}} for name in pages[index]],
            }
        )

    return asked, fetch


def test_every_page_is_read_and_the_version_is_the_first_page_s() -> None:
    asked, fetch = _pages(["a", "b"], ["c"], [])
    items, version = loadmodel.list_all(fetch)
    assert [item["metadata"]["name"] for item in items] == ["a", "b", "c"]
    assert version == "rv-0"
    assert asked == [None, "1", "2"]

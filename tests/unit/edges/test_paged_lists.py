"""A paged LIST is read a page at a time: never more than one page's bodies held."""

from __future__ import annotations

import json
from typing import Any

from metricsched.edges import kube


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


def test_the_next_page_is_asked_for_only_once_the_last_one_is_handled() -> None:
    asked, fetch = _pages(["a", "b"], ["c"])
    pages = kube.Paged(fetch)
    items = iter(pages)
    assert next(items)["metadata"]["name"] == "a"
    assert next(items)["metadata"]["name"] == "b"
    assert asked == [None]
    assert next(items)["metadata"]["name"] == "c"
    assert asked == [None, "1"]
    assert list(items) == []


def test_the_list_version_is_the_first_page_s() -> None:
    _, fetch = _pages(["a"], ["b"], [])
    pages = kube.Paged(fetch)
    assert [item["metadata"]["name"] for item in pages] == ["a", "b"]
    assert pages.version == "rv-0"


def test_list_all_still_returns_every_item_and_the_version() -> None:
    _, fetch = _pages(["a", "b"], ["c"])
    items, version = kube.list_all(fetch)
    assert [item["metadata"]["name"] for item in items] == ["a", "b", "c"]
    assert version == "rv-0"

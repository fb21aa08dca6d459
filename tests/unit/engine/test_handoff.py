"""The one readiness definition (core.handoff): what the engine, the API and the reporter all call."""

from __future__ import annotations

from core.handoff import Assessment, assess, ready_for_cycle
from schemas import PackageStatus
from tests.unit.engine.builders import at, package


def test_a_summary_is_what_makes_a_ready_package_ready() -> None:
    summary_only = package("ready", complete=False)
    assert assess(summary_only).status is PackageStatus.READY
    assert assess(summary_only).as_claimed
    blank = summary_only.model_copy(update={"summary_text": "  "})
    verdict = assess(blank)
    assert verdict.status is PackageStatus.DRAFT
    assert verdict.reason == "demoted to draft: a ready package needs summary_text"


def test_rejections_name_the_package_that_stays() -> None:
    current = package("consumed", package_id="hp-1", seconds=10)
    assert assess(package("ready", package_id="hp-1", seconds=10), current).reason.startswith("rejected: the package")
    live = package("ready", package_id="hp-2", seconds=10)
    older = assess(package("ready", package_id="hp-0", seconds=5), live)
    assert (older.status, older.reason) == (None, "rejected: not newer than the current package hp-2")
    assert assess(live, live) == Assessment(None)  # a repeat says nothing


def test_ready_means_for_the_current_cycle() -> None:
    ready = package("ready", seconds=10)
    assert ready_for_cycle(ready, None)
    assert ready_for_cycle(ready, at(10))
    assert not ready_for_cycle(ready, at(11))  # a compaction after it used it up
    assert not ready_for_cycle(package("draft", seconds=10), None)

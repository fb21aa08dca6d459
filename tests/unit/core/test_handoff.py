"""The one readiness definition (core.handoff): what the engine, the API and the reporter all call."""

from __future__ import annotations

from core.engine_config import EngineConfig
from core.handoff import Assessment, assess, ready_for_cycle
from schemas import HandoffPackage, PackageStatus
from schemas.copies import replaced
from streams.engine.fold import apply_handoff
from tests.unit.engine.builders import at, package
from tests.unit.engine.test_fold import Thread

CONFIG = EngineConfig()


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


def consumed_into(thread: str, seconds: float) -> HandoffPackage:
    ready = package("ready", package_id="hp-1", seconds=0)
    update = {"package_status": PackageStatus.CONSUMED, "to_thread_id": thread, "consumed_at": at(seconds)}
    return replaced(ready, update)


def test_the_first_consume_is_final_and_a_second_one_cannot_take_the_package() -> None:
    first = consumed_into("relay-a", 5)
    assert assess(first, package("ready", package_id="hp-1")).status is PackageStatus.CONSUMED
    other = assess(consumed_into("relay-b", 6), first)
    assert (other.status, other.reason) == (None, "rejected: the package is already consumed into relay-a, it is final")
    later_repeat = assess(consumed_into("relay-a", 9), first)  # the same consume again, with its own consumed_at
    assert later_repeat.status is None
    assert assess(first, first) == Assessment(None)  # the very same version: a silent repeat
    expired = replaced(package("ready", package_id="hp-1"), {"package_status": PackageStatus.EXPIRED})
    late = assess(consumed_into("relay-a", 7), expired)
    assert late.reason == "rejected: the package is already expired, it is final"


def test_the_engine_keeps_the_first_consume_when_two_race_through_the_topic() -> None:
    thread = Thread()
    thread.snap(20, 0)
    thread.feed(apply_handoff(thread.slot, package("ready", package_id="hp-1", seconds=1), at(1), CONFIG))
    thread.feed(apply_handoff(thread.slot, consumed_into("relay-a", 5), at(5), CONFIG))
    thread.feed(apply_handoff(thread.slot, consumed_into("relay-b", 5), at(5), CONFIG))
    assert (thread.state.handoff.to_thread_id, thread.state.handoff.consumed_at) == ("relay-a", at(5))
    assert thread.state.handoff_decision.reason.endswith("consumed into relay-a, it is final")

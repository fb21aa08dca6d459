"""The tap: Faust's conductor fills it, a fold takes batches from it (no broker: the conductor's calls made by hand)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from types import SimpleNamespace

from mode.utils.queues import FlowControlEvent

from streams.tap import Tap


@dataclass
class App:
    consumer_generation_id: int = 1
    flow_control: FlowControlEvent = field(default_factory=FlowControlEvent)


def event(offset: int, generation: int = 1) -> SimpleNamespace:
    return SimpleNamespace(message=SimpleNamespace(offset=offset, generation_id=generation))


def offsets(events: list) -> list[int]:
    return [e.message.offset for e in events]


def tap(app: App, released: list, max_: int = 3, within: float = 0.05) -> Tap:
    return Tap(app, max_, within, released.append)  # type: ignore[arg-type]


async def test_a_batch_goes_as_soon_as_it_is_full_and_a_partial_one_after_within() -> None:
    the_tap = tap(App(), [], max_=3, within=0.05)
    batches = the_tap.batches()
    for offset in range(4):
        the_tap.put_nowait_enhanced(event(offset), on_pressure_high=None, on_pressure_drop=None)
    assert offsets(await asyncio.wait_for(anext(batches), 0.01)) == [0, 1, 2]  # full: no wait
    loop = asyncio.get_running_loop()
    started = loop.time()
    assert offsets(await anext(batches)) == [3]
    assert loop.time() - started >= 0.04


async def test_a_full_tap_holds_the_conductor_back_until_a_batch_is_taken() -> None:
    the_tap = tap(App(), [], max_=2)
    for offset in range(4):  # capacity: two batches
        the_tap.put_nowait_enhanced(event(offset))
    assert the_tap.full()
    waiting = asyncio.create_task(the_tap.put(event(4)))
    await asyncio.sleep(0.01)
    assert not waiting.done()
    batches = the_tap.batches()
    assert offsets(await anext(batches)) == [0, 1]
    await asyncio.wait_for(waiting, 1)
    assert offsets(await anext(batches)) == [2, 3]
    assert offsets(await anext(batches)) == [4]


async def test_records_of_an_older_generation_are_released_not_yielded() -> None:
    app, released = App(consumer_generation_id=1), []
    the_tap = tap(app, released, max_=3)
    the_tap.put_nowait_enhanced(event(0))
    the_tap.put_nowait_enhanced(event(1))
    app.consumer_generation_id = 2  # a rebalance ended: the partition may belong to another worker now
    the_tap.put_nowait_enhanced(event(0, generation=2))
    assert offsets(await anext(the_tap.batches())) == [0]
    assert offsets(released) == [0, 1]


async def test_revocation_clears_the_tap_and_releases_what_it_held() -> None:
    app, released = App(), []
    the_tap = tap(app, released, max_=2)
    for offset in range(4):
        the_tap.put_nowait_enhanced(event(offset))
    app.flow_control.clear()  # what Faust does to its queues when partitions are revoked
    assert offsets(released) == [0, 1, 2, 3]
    assert not the_tap.full()
    the_tap.put_nowait_enhanced(event(9))
    assert offsets(await anext(the_tap.batches())) == [9]

"""The fetch loop's hand-off without tasks (streams/runtime/faust_delivery.py), on a Service like Faust's consumer.

The correction changes what it costs, not what it delivers: upstream's hand-off is run beside it once, to show the
tasks it creates for a delivery that never waits."""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Coroutine
from typing import Any

import pytest
from mode import Service

from streams.runtime import faust_delivery


class Loop(Service):
    """What `_wait_first` uses of the consumer: a flow-control event and mode's own wait_first and stop flags."""

    def __init__(self) -> None:
        super().__init__()
        self.suspend_flow = asyncio.Event()


async def hand_off(loop: Loop, delivery) -> object:
    return await faust_delivery._wait_first(loop, delivery, loop.suspend_flow.wait())


def counting_tasks() -> list[object]:
    """Every task created on the running loop from now on."""
    loop, created = asyncio.get_running_loop(), []

    def factory(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any], **kwargs: Any) -> asyncio.Task:
        created.append(coro)
        return asyncio.Task(coro, loop=loop, **kwargs)

    loop.set_task_factory(factory)  # type: ignore[arg-type]
    return created


@pytest.mark.parametrize("hand_off_with", ["upstream", "patched"])
async def test_a_delivery_that_never_waits_completes_in_place_and_nothing_is_left_unawaited(hand_off_with: str) -> None:
    """Upstream races every delivery against three events, a task each plus one for the delivery; the hand-off
    that steps it in place creates none, with the same result."""

    async def deliver() -> str:
        return "queued"

    loop = Loop()
    tasks_before = len(asyncio.all_tasks())
    created = counting_tasks()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a raced coroutine left unawaited would warn
            if hand_off_with == "upstream":
                result = await faust_delivery._upstream_wait_first(loop, deliver(), loop.suspend_flow.wait())
            else:
                result = await hand_off(loop, deliver())
    finally:
        asyncio.get_running_loop().set_task_factory(None)
    assert (result.results, result.stopped) == (["queued"], False)
    if hand_off_with == "upstream":
        assert len(created) >= 4  # the delivery and the three events it races against
    else:
        assert created == []
    await asyncio.sleep(0)  # upstream's cancelled tasks finish
    assert len(asyncio.all_tasks()) == tasks_before


async def test_a_delivery_that_waits_is_carried_on_to_its_end_with_the_awaited_values() -> None:
    loop, steps = Loop(), []
    later = asyncio.get_running_loop().create_future()
    asyncio.get_running_loop().call_later(0.01, later.set_result, 42)

    async def deliver() -> int:
        await asyncio.sleep(0)  # a bare yield to the loop
        steps.append(await later)  # a future resolved later
        steps.append(await asyncio.wait_for(asyncio.sleep(0.01, "slept"), 1))  # a task of its own
        return len(steps)

    result = await hand_off(loop, deliver())
    assert steps == [42, "slept"]
    assert result.results == [2]


async def test_a_failure_while_waiting_reaches_the_delivery_where_it_awaited() -> None:
    failing = asyncio.get_running_loop().create_future()
    asyncio.get_running_loop().call_later(0.01, failing.set_exception, ValueError("boom"))
    caught = []

    async def deliver() -> str:
        try:
            await failing
        except ValueError as error:
            caught.append(str(error))
        return "handled"

    result = await hand_off(Loop(), deliver())
    assert (caught, result.results) == (["boom"], ["handled"])


async def test_suspending_flow_cancels_a_waiting_delivery_inside_it() -> None:
    loop, cleaned = Loop(), []
    never = asyncio.get_running_loop().create_future()

    async def deliver() -> None:
        try:
            await never
        finally:
            cleaned.append("finally ran")

    waiting = asyncio.ensure_future(hand_off(loop, deliver()))
    await asyncio.sleep(0.01)
    loop.suspend_flow.set()  # a rebalance: upstream abandons the delivery
    result = await asyncio.wait_for(waiting, 1)
    assert result.results == [True]  # the suspend_flow wait won the race
    await asyncio.sleep(0)
    assert cleaned == ["finally ran"]
    assert never.cancelled()

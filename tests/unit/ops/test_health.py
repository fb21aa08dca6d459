"""The rebalance watch and the task stacks it reports, without a broker."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Generator

from core.health import RebalanceWatch
from streams.runtime.stacks import task_stacks


def test_a_rebalance_is_stuck_only_once_nothing_advanced_for_the_limit() -> None:
    watch = RebalanceWatch(limit=60)
    watch.observe(0, rebalancing=False, marker=(1, 0))
    assert watch.stuck_for(1000) is None  # not rebalancing: never stuck
    watch.observe(10, rebalancing=True, marker=(1, 0))
    watch.observe(50, rebalancing=True, marker=(1, 0))
    assert watch.stuck_for(69) is None
    assert watch.stuck_for(70) == 60
    watch.observe(75, rebalancing=True, marker=(1, 5))  # recovery read on: a new wait starts
    assert watch.stuck_for(130) is None
    assert watch.stuck_for(135) == 60


def test_a_report_is_due_again_only_for_a_new_episode() -> None:
    watch = RebalanceWatch(limit=5)
    watch.observe(0, rebalancing=True, marker="a")
    watch.observe(6, rebalancing=True, marker="a")
    watch.reported = True
    watch.observe(12, rebalancing=True, marker="a")
    assert watch.reported
    assert watch.stuck_for(12) == 12
    watch.observe(13, rebalancing=False, marker="a")  # the rebalance ended
    assert not watch.reported
    assert watch.stuck_for(13) is None
    watch.observe(14, rebalancing=True, marker="a")
    assert watch.stuck_for(18) is None
    assert watch.stuck_for(19) == 5


async def waits_for_ever(event: asyncio.Event) -> None:
    await event.wait()


async def outer(event: asyncio.Event) -> None:
    await waits_for_ever(event)


async def test_task_stacks_follow_each_await_chain_and_put_the_chosen_tasks_first() -> None:
    event = asyncio.Event()
    tasks = [asyncio.create_task(waits_for_ever(event), name="plain"), asyncio.create_task(outer(event), name="nested")]
    await asyncio.sleep(0)
    try:
        stacks = task_stacks(asyncio.get_running_loop(), first=lambda frame: "in outer" in frame)
        assert stacks[0].startswith("Task nested (most recent await last):")
        functions = [line.rsplit(" in ", 1)[1] for line in stacks[0].splitlines()[1:4]]
        assert functions == ["outer", "waits_for_ever", "wait"]
        assert any(stack.startswith("Task plain ") for stack in stacks[1:])
    finally:
        event.set()
        await asyncio.gather(*tasks)


class Wrapped:
    """Awaited through `coroutine.__await__()`, as Faust awaits an agent's actor."""

    def __init__(self, event: asyncio.Event) -> None:
        self.coro = waits_in_a_loop(event)

    def __await__(self) -> Generator[object, None, None]:
        return self.coro.__await__()


async def ticks(event: asyncio.Event) -> AsyncIterator[int]:
    while True:
        await waits_for_ever(event)
        yield 1


async def waits_in_a_loop(event: asyncio.Event) -> None:
    async for _ in ticks(event):
        return


async def test_the_chain_goes_through_an_await_wrapper_and_into_an_async_for() -> None:
    event = asyncio.Event()
    task = asyncio.create_task(_run(Wrapped(event)), name="actor")
    await asyncio.sleep(0)
    try:
        stack = next(s for s in task_stacks(asyncio.get_running_loop()) if s.startswith("Task actor "))
        functions = [line.rsplit(" in ", 1)[1] for line in stack.splitlines()[1:]]
        assert functions[:4] == ["_run", "waits_in_a_loop", "ticks", "waits_for_ever"]
    finally:
        event.set()
        await task


async def _run(awaitable: Wrapped) -> None:
    await awaitable

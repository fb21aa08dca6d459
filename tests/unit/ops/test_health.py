"""The rebalance watch and the task stacks it reports, without a broker."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from streams.health import RebalanceWatch
from streams.stacks import generator_stacks, task_stacks


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


async def ticks(event: asyncio.Event) -> AsyncIterator[int]:
    while True:
        await waits_for_ever(event)
        yield 1


async def test_a_suspended_async_generator_shows_where_it_waits() -> None:
    event = asyncio.Event()
    generator = ticks(event)
    task = asyncio.create_task(anext(generator))
    await asyncio.sleep(0)
    try:
        stack = next(s for s in generator_stacks() if s.startswith("Async generator ticks "))
        assert [line.rsplit(" in ", 1)[1] for line in stack.splitlines()[1:3]] == ["ticks", "waits_for_ever"]
    finally:
        event.set()
        await task
        await generator.aclose()

"""Where each asyncio task of a loop is suspended, down the chain of what it awaits.

asyncio's own `Task.print_stack` shows a task's outermost frame only, which does not say what a stuck task waits for.
A task in an `async for` over an async generator shows only its own frame, since nothing links the two: the suspended
generators are listed on their own (`generator_stacks`).
"""

from __future__ import annotations

import asyncio
import gc
import inspect
from collections.abc import Callable, Iterator


def task_stacks(loop: asyncio.AbstractEventLoop, first: Callable[[str], bool] = lambda frame: False) -> list[str]:
    """Each task's await chain, outermost first; the chains with a frame that `first` accepts come first."""
    chains = [(task.get_name(), list(_awaits(task.get_coro()))) for task in asyncio.all_tasks(loop)]
    chains.sort(key=lambda chain: not any(first(frame) for frame in chain[1]))
    return ["\n".join([f"Task {name} (most recent await last):", *frames]) for name, frames in chains]


def generator_stacks() -> list[str]:
    """Each suspended async generator's await chain (what an agent's `async for` is really waiting for)."""
    return [
        "\n".join([f"Async generator {agen.__qualname__} (most recent await last):", *_awaits(agen)])
        for agen in gc.get_objects()
        if inspect.isasyncgen(agen) and agen.ag_frame is not None
    ]


def _awaits(coro: object) -> Iterator[str]:
    while coro is not None:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None) or getattr(coro, "ag_frame", None)
        if frame is not None:
            yield f'  File "{frame.f_code.co_filename}", line {frame.f_lineno}, in {frame.f_code.co_name}'
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None) or getattr(coro, "ag_await", None)

"""Where each asyncio task of a loop is suspended, down the chain of what it awaits.

asyncio's own `Task.print_stack` shows a task's outermost frame only, which does not say what a stuck task waits for.
The chain also passes through objects that hide what they await: `coroutine.__await__()` wrappers (a Faust actor is
awaited that way) and the `asend` of an `async for` over an async generator. For those, the coroutine or generator
they hold is found among their references.
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


def _awaits(coro: object) -> Iterator[str]:
    seen: set[int] = set()
    while coro is not None and id(coro) not in seen:
        seen.add(id(coro))
        frame = _first(coro, "cr_frame", "gi_frame", "ag_frame")
        if frame is not None:
            yield f'  File "{frame.f_code.co_filename}", line {frame.f_lineno}, in {frame.f_code.co_name}'
            coro = _first(coro, "cr_await", "gi_yieldfrom", "ag_await")
        else:
            coro = _held(coro)


def _first(coro: object, *attributes: str) -> object | None:
    return next((value for name in attributes if (value := getattr(coro, name, None)) is not None), None)


def _held(wrapper: object) -> object | None:
    """The suspended coroutine or async generator an awaitable without a frame of its own holds, if any."""
    return next((ref for ref in gc.get_referents(wrapper) if inspect.iscoroutine(ref) or inspect.isasyncgen(ref)), None)

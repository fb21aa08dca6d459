"""Faust's hand-off of each fetched record to the streams, without four tasks per record when nothing has to wait.

faust-streaming 0.15's fetch loop (`Consumer._drain_messages`) passes every record to the streams with
`wait_first(on_message(record), suspend_flow.wait())`: it creates a task for the delivery, one for each of the three
events it races against (flow suspended, service stopped, service crashed), waits on all four and cancels three.
Delivery itself almost never waits (it puts the record on each stream's queue unless a queue is full, flow control is
suspended or the producer buffer is full), and the worker's topology delivers each input several times over (every
output is read by one to three agents), so those tasks were a large part of a CPU-bound worker
(docs/delivery-guarantees.md has the figures).

`wait_first` is only called from that loop, so the consumer's is replaced: the delivery coroutine is stepped once, in
place, while flow is not suspended. If it completes in that step (the common case) there is nothing to race; if it has
to wait, the rest of it runs under upstream's `wait_first`, exactly as before (`_resume` carries on the coroutine from
where it stopped, as a task would have).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from faust.transport.consumer import Consumer
from mode.services import WaitResults

_upstream_wait_first = Consumer.wait_first


async def _wait_first(
    self: Consumer,
    *coros: Any,
    timeout: Any = None,  # noqa: ASYNC109 - upstream's signature
) -> WaitResults:
    delivery = coros[0] if coros else None
    if not asyncio.iscoroutine(delivery) or self.suspend_flow.is_set() or self.should_stop:
        return await _upstream_wait_first(self, *coros, timeout=timeout)
    try:
        waiting_on = delivery.send(None)
    except StopIteration as done:
        _close(coros[1:])
        return WaitResults([delivery], [done.value], False)
    except BaseException:
        _close(coros[1:])
        raise
    return await _upstream_wait_first(self, _resume(delivery, waiting_on), *coros[1:], timeout=timeout)


def _close(coros: tuple[Any, ...]) -> None:
    """Close the raced coroutines that were never started (nothing to cancel, no 'never awaited' warning)."""
    for coro in coros:
        if asyncio.iscoroutine(coro):
            coro.close()


async def _resume(coro: Coroutine[Any, Any, Any], waiting_on: Any) -> Any:
    """Run `coro` on from the point where it yielded `waiting_on` (a future, or None for a bare yield to the loop),
    as the task driving it would: resume it once the future is done (the future's outcome reaches it through the
    future itself); a cancellation of this task reaches it as well."""
    while True:
        try:
            if waiting_on is None:
                await asyncio.sleep(0)
            else:
                waiting_on._asyncio_future_blocking = False  # taken, as a task takes what its coroutine yields
                await waiting_on
        except asyncio.CancelledError as cancelled:
            if waiting_on is None or not waiting_on.cancelled():  # this task was cancelled, not what `coro` awaits
                try:
                    waiting_on = coro.throw(cancelled)
                except StopIteration as done:
                    return done.value
                continue
        except BaseException:  # `coro` reads the future's failure from the future when resumed
            pass
        try:
            waiting_on = coro.send(None)
        except StopIteration as done:
            return done.value


def apply() -> None:
    Consumer.wait_first = _wait_first  # type: ignore[method-assign]

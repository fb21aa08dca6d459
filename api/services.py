"""The API's Kafka side, started and stopped with the app: the producer, the policy and thread books, the SSE
broadcaster."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

from api.events import Broadcaster
from api.policies import PolicyBook
from api.publisher import KafkaPublisher, Publisher
from api.settings import ApiSettings
from api.thread_book import ThreadBook
from api.topic_reader import TopicTable, open_reader, topic_partitions
from core.settings import Settings


@dataclass(frozen=True)
class KafkaServices:
    publisher: Publisher
    policies: PolicyBook
    broadcaster: Broadcaster
    threads: ThreadBook


@contextlib.asynccontextmanager
async def kafka_services(settings: Settings, api: ApiSettings) -> AsyncIterator[KafkaServices]:
    """Everything started and caught up (policies read to the end) before the first request; stopped on exit."""
    bootstrap = settings.kafka_bootstrap_servers
    if not bootstrap:
        raise ValueError("the API needs CTXBUDGET_KAFKA_BOOTSTRAP_SERVERS (or the broker `ctxbudget run` starts)")
    async with contextlib.AsyncExitStack() as stack:
        publisher = KafkaPublisher(bootstrap, api.kafka_timeout_seconds)
        await publisher.start()
        stack.push_async_callback(publisher.stop)

        policies, threads = PolicyBook(), ThreadBook()
        for table, topic in ((policies, "policies"), (threads, "thread-state")):
            await _keep(stack, table, bootstrap, settings.topic(topic))

        broadcaster = Broadcaster(bootstrap, settings.topic("client-events"), api.sse_queue_size)
        await broadcaster.start()
        stack.push_async_callback(broadcaster.stop)
        yield KafkaServices(publisher, policies, broadcaster, threads)


async def _keep(stack: contextlib.AsyncExitStack, table: TopicTable, bootstrap: str, topic: str) -> None:
    """`table` read from the whole topic now, and followed until the stack closes."""
    reader = await open_reader(bootstrap, topic, await topic_partitions(bootstrap, topic), from_start=True)
    stack.push_async_callback(reader.stop)
    await table.catch_up(reader)
    follower = asyncio.create_task(table.follow(reader), name=f"table-{topic}")
    stack.push_async_callback(_cancel, follower)


async def _cancel(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task

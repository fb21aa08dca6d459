"""The `relay` mode of bench/fleet_relay.py: each simulated worker runs the reporter's own relay (reporter.relay.relay).

The simulated fleet reports straight to Kafka, so each worker's relay lists its threads' open actions from the API
with that worker's token (`GET /api/v1/master-actions?open=true`), acknowledges them, and answers a wrap-up with a
package posted through the API, draft then ready, exactly as `ctxbudget report` does. A simulated agent cannot be
asked: the packages are made from facts alone, with a line standing in for the transcript's latest message.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterable
from datetime import timedelta
from pathlib import Path

from api.tokens import Role, issue_token
from reporter.delivery.http import HttpDelivery
from reporter.readings import Identity
from reporter.relay.relay import Relay, ThreadWork
from reporter.relay.write import RelayPaths
from streams.simulator import worker_id_of

POLL_SECONDS = 1.0


def _work(thread_id: str) -> ThreadWork:
    return ThreadWork(latest_messages=(f"{thread_id}: the simulated agent's latest step.",))


def worker_relays(api: str, secret: bytes, threads: Iterable[tuple[str, str]], state_dir: Path) -> list[Relay]:
    """One relay per simulated worker of the (thread, project) pairs."""
    projects: dict[str, set[str]] = {}
    for thread_id, project_id in threads:
        projects.setdefault(worker_id_of(thread_id), set()).add(project_id)
    relays = []
    for worker, owned in sorted(projects.items()):
        token = issue_token(secret, Role.WORKER, worker, sorted(owned), ttl=timedelta(hours=2))
        identity = Identity(node_id=worker, worker_id=worker, project_id=sorted(owned)[0])
        paths = RelayPaths(state_dir / worker)
        relays.append(Relay(identity, HttpDelivery(api, token), paths.outbox(), paths.patches, work_of=_work))
    return relays


@contextlib.asynccontextmanager
async def relays_running(relays: list[Relay]) -> AsyncIterator[None]:
    tasks = [
        asyncio.create_task(relay.run(relay.deliverer.open_actions, POLL_SECONDS))  # type: ignore[attr-defined]
        for relay in relays
    ]
    try:
        yield
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

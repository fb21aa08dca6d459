"""Stand-ins for the API's collaborators in unit tests: a publisher that records or fails, an untouchable database."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from fastapi import FastAPI

from api.app import create_app
from api.events import Broadcaster
from api.policies import PolicyBook
from api.publisher import KafkaUnavailable
from api.services import KafkaServices
from api.settings import ApiSettings
from api.thread_book import ThreadBook
from api.tokens import Role, issue_token
from core.settings import Settings

SECRET = b"unit-test-secret-of-at-least-32-bytes!!"
PREFIX = "ctx."


@dataclass
class RecordingPublisher:
    sent: list[tuple[str, bytes, bytes]] = field(default_factory=list)
    failing: bool = False

    async def publish(self, topic: str, key: bytes, value: bytes) -> None:
        if self.failing:
            raise KafkaUnavailable("broker unreachable")
        self.sent.append((topic, key, value))


class UntouchableDatabase:
    """Any query fails the test: the request should have been answered before reaching the database."""

    def query(self, *args: object, **kwargs: object) -> None:
        raise AssertionError("the database was queried")


def make_app(
    tmp_path: Path,
    publisher: RecordingPublisher,
    policies: PolicyBook | None = None,
    clickhouse: object | None = None,
    api: ApiSettings | None = None,
    threads: ThreadBook | None = None,
    clickhouse_dsn: str | None = None,
) -> FastAPI:
    """`clickhouse_dsn` names the database `clickhouse` was opened on, for the routes that open their own client."""
    settings = Settings(
        data_dir=tmp_path, topic_prefix=PREFIX, kafka_bootstrap_servers="unused:9092", clickhouse_dsn=clickhouse_dsn
    )
    broadcaster = Broadcaster("unused:9092", f"{PREFIX}client-events", queue_size=10)

    @contextlib.asynccontextmanager
    async def services() -> AsyncIterator[KafkaServices]:
        yield KafkaServices(publisher, policies or PolicyBook(), broadcaster, threads or ThreadBook())

    return create_app(
        settings, clickhouse or UntouchableDatabase(), api or ApiSettings(), services=services, secret=SECRET
    )


# A day: module-level headers are made at collection, and a whole suite runs far longer than minutes.
def bearer(
    role: Role, subject: str, *projects: str, secret: bytes = SECRET, ttl_seconds: int = 86_400
) -> dict[str, str]:
    token = issue_token(secret, role, subject, projects, ttl=timedelta(seconds=ttl_seconds))
    return {"Authorization": f"Bearer {token}"}


class EmptyDatabase:
    """A database without rows: every read finds nothing (a count is 0)."""

    def query(self, *args: object, **kwargs: object) -> EmptyResult:
        return EmptyResult()


class EmptyResult:
    result_rows = ((0,),)

    def named_results(self) -> list[dict[str, object]]:
        return []

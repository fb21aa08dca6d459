"""Consuming a handoff package (issue 35 item 7): exclusive (the first consume wins, a later one into another thread
is 409) and idempotent (a repeat answers the same `consumed_at`), agreeing with the engine's own fold."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import httpx2
import pytest

from api.mcp_server.asgi_stream import StreamingASGITransport
from api.packages import ConsumeRefused, consume
from api.publisher import KafkaUnavailable
from api.settings import ApiSettings
from api.thread_book import ThreadBook
from api.tokens import Role
from core.engine_config import EngineConfig
from schemas import Codec, HandoffPackage, PackageStatus
from schemas.codec import encode_record
from schemas.copies import replaced
from streams.engine.fold import apply_handoff
from tests.unit.api.fakes import bearer, make_app
from tests.unit.engine.builders import at, package
from tests.unit.engine.test_fold import Thread

USER = bearer(Role.USER, "kris", "proj-1")
URL = "/api/v1/handoff-packages/hp-1/consume"
NOW = datetime(2026, 3, 25, 9, tzinfo=UTC)


def into(thread: str, seconds: float = 5) -> HandoffPackage:
    update = {"package_status": PackageStatus.CONSUMED, "to_thread_id": thread, "consumed_at": at(seconds)}
    return replaced(package("ready"), update)


def test_a_ready_package_is_consumed_once_and_a_repeat_is_the_same_version() -> None:
    made = consume(package("ready"), "relay-a", NOW)
    assert made.new
    assert (made.package.package_status, made.package.to_thread_id, made.package.consumed_at) == (
        PackageStatus.CONSUMED,
        "relay-a",
        NOW,
    )
    assert consume(made.package, "relay-a", datetime(2027, 1, 1, tzinfo=UTC)) == type(made)(made.package, new=False)
    with pytest.raises(ConsumeRefused, match="already consumed into thread relay-a"):
        consume(made.package, "relay-b", NOW)
    with pytest.raises(ConsumeRefused, match="the package is draft, only a ready one can be consumed"):
        consume(package("draft"), "relay-a", NOW)


@dataclass
class PackageDatabase:
    """The stored package: the ready version, as the sinks wrote it before any consume."""

    stored: HandoffPackage

    def query(self, *args: object, **kwargs: object) -> PackageDatabase:
        return self

    def named_results(self) -> list[dict[str, object]]:
        return [self.stored.model_dump()]


@dataclass
class Engine:
    """The engine's fold of `handoff-packages` behind a publisher: each record published is applied to the thread's
    slot after `delay` seconds (never, when `silent`) and the new state reaches the API's book as `thread-state`
    would. `ahead`: consumes another writer got onto the topic before this API's."""

    book: ThreadBook
    thread: Thread
    delay: float = 0.05
    silent: bool = False
    ahead: list[HandoffPackage] = field(default_factory=list)
    sent: list[HandoffPackage] = field(default_factory=list)

    def apply(self, record: HandoffPackage) -> None:
        self.thread.feed(apply_handoff(self.thread.slot, record, at(60), EngineConfig()))
        self.book.apply(self.thread.state.thread_id.encode(), encode_record(self.thread.state))

    async def publish(self, topic: str, key: bytes, value: bytes) -> None:
        record = Codec(HandoffPackage).decode(value)
        assert (topic, key) == ("ctx.handoff-packages", record.from_thread_id.encode())
        self.sent.append(record)
        if not self.silent:
            for early in [*self.ahead, record]:
                asyncio.get_running_loop().call_later(self.delay, self.apply, early)
            self.ahead = []


@pytest.fixture
def engine() -> Engine:
    thread = Thread()
    thread.snap(20, 0)
    book = ThreadBook()
    engine = Engine(book, thread)
    engine.apply(package("ready"))
    return engine


@contextlib.asynccontextmanager
async def served(tmp_path: Path, engine: Engine) -> AsyncIterator[httpx2.AsyncClient]:
    """The app over the engine, its lifespan entered in the test's own task (the MCP session manager's task group
    must be left in the task that entered it)."""
    app = make_app(
        tmp_path,
        engine,  # type: ignore[arg-type]
        clickhouse=PackageDatabase(package("ready")),
        threads=engine.book,
        api=ApiSettings(consume_verdict_seconds=1.0),
    )
    async with (
        app.router.lifespan_context(app),
        httpx2.AsyncClient(transport=StreamingASGITransport(app), base_url="http://api") as client,
    ):
        yield client


async def post(http: httpx2.AsyncClient, to_thread: str) -> httpx2.Response:
    return await http.post(URL, json={"to_thread_id": to_thread}, headers=USER)


async def test_of_two_racing_consumes_the_first_wins_and_the_other_is_refused_with_the_winner(tmp_path, engine) -> None:
    async with served(tmp_path, engine) as http:
        answers = await asyncio.gather(post(http, "relay-a"), post(http, "relay-b"))
        assert sorted(answer.status_code for answer in answers) == [202, 409]
        won = next(answer for answer in answers if answer.status_code == 202).json()["to_thread_id"]
        [lost] = [answer for answer in answers if answer.status_code == 409]
        assert lost.json() == {
            "detail": f"the package is already consumed into thread {won}; a package continues in one thread"
        }
        assert [record.to_thread_id for record in engine.sent] == [won]  # the loser never reached the topic
        assert engine.thread.state.handoff.to_thread_id == won
        late = await post(http, "relay-c")  # after the engine's verdict, from the book
        assert late.status_code == 409
        assert won in late.json()["detail"]


async def test_repeating_a_consume_answers_the_same_consumed_at_and_publishes_nothing_more(tmp_path, engine) -> None:
    async with served(tmp_path, engine) as http:
        answers = [await post(http, "relay-a") for _ in range(3)]
        assert [answer.status_code for answer in answers] == [202] * 3
        assert len({answer.json()["consumed_at"] for answer in answers}) == 1
        assert HandoffPackage.model_validate_json(answers[0].content) == engine.thread.state.handoff
        assert len(engine.sent) == 1


async def test_a_consume_another_writer_got_in_first_is_refused_as_the_engine_decided(tmp_path, engine) -> None:
    async with served(tmp_path, engine) as http:
        engine.ahead = [into("relay-elsewhere")]  # e.g. a second API process, unseen by this one's reservation
        answer = await post(http, "relay-a")
        assert answer.status_code == 409
        assert "relay-elsewhere" in answer.json()["detail"]
        assert engine.thread.state.handoff.to_thread_id == "relay-elsewhere"
        assert "it is final" in engine.thread.state.handoff_decision.reason


async def test_while_the_engine_is_behind_the_reservation_answers_and_keeps_the_package_for_the_first(
    tmp_path, engine
) -> None:
    async with served(tmp_path, engine) as http:
        engine.silent = True
        first = await post(http, "relay-a")
        assert first.status_code == 202  # after consume_verdict_seconds: the version published
        assert (first.json()["package_status"], first.json()["to_thread_id"]) == ("consumed", "relay-a")
        repeat, other = await asyncio.gather(post(http, "relay-a"), post(http, "relay-b"))
        assert (repeat.status_code, other.status_code) == (202, 409)
        assert repeat.json()["consumed_at"] == first.json()["consumed_at"]
        assert len(engine.sent) == 1
        engine.apply(engine.sent[0])  # the engine catches up: its version answers from now on
        assert (await post(http, "relay-a")).json() == first.json()


async def test_a_failed_publish_frees_the_package(tmp_path, engine) -> None:
    async with served(tmp_path, engine) as http:
        engine.silent = True

        async def unavailable(topic: str, key: bytes, value: bytes) -> None:
            raise KafkaUnavailable("broker unreachable")

        engine.publish, publish = unavailable, engine.publish  # type: ignore[method-assign]
        assert (await post(http, "relay-a")).status_code == 503
        engine.publish = publish  # type: ignore[method-assign]
        assert (await post(http, "relay-b")).status_code == 202

"""The master's writes through a real `ctxbudget run` (broker, folds, sinks, API), issue 21:

- a task importance set over HTTP re-ranks the project's view (spec 8.1), in the topic and in GET /api/v1/projects/{id},
  and is still there after the worker restarts;
- a manual compaction request is a `compact_now` action a master can ack, done once the thread's compaction is seen;
- consuming the main thread's package moves the master conversation to the relay thread (spec 7.3), as the BFF's
  conversation list shows.
"""

from __future__ import annotations

import asyncio
import json
import time
import urllib.error
import urllib.request
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from api.settings import ApiSettings, token_secret
from api.tokens import Role, issue_token
from core.settings import Settings
from schemas import Conversation, ConversationType, HandoffPackage, ThreadContextSnapshot
from streams.local_kafka import free_port
from streams.topic_admin import ensure_topics
from tests.integration.pipeline import Outputs, WorkerProcess, get_when_up, produce, until_listed
from tests.unit.engine.builders import snapshot

pytestmark = [pytest.mark.kafka, pytest.mark.clickhouse]

PROJECT = "proj-master"


def send(method: str, url: str, token: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
    """A JSON request; (status, body), an error status included (blocking)."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method, headers={"Authorization": f"Bearer {token}"})
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


async def until_status(method: str, url: str, token: str, body: dict | None, status: int, within: float) -> Any:
    """Send until the answer is `status`: the API finds a thread, action or package once the engine or the sinks
    have it."""
    deadline = time.monotonic() + within
    while True:
        code, answer = await asyncio.to_thread(send, method, url, token, body)
        if code == status:
            return answer
        if time.monotonic() > deadline:
            raise AssertionError(f"{method} {url} answered {code} {answer}, not {status}, within {within} s")
        await asyncio.sleep(0.5)


def now_snapshot(pct: float, thread: str, version: int, compactions: int = 0) -> ThreadContextSnapshot:
    now = datetime.now(UTC)
    return snapshot(pct, thread=thread, project=PROJECT, version=version, compactions=compactions).model_copy(
        update={"captured_at": now, "last_compaction_at": now if compactions else None}
    )


def view_order(outputs: Outputs) -> list[tuple[str, int | None]]:
    views = [v for v in outputs.records["project-risk"] if v["project_id"] == PROJECT]
    return [(t["thread_id"], t.get("task_importance")) for t in views[-1]["active_thread_contexts"]] if views else []


async def test_importance_ranks_compact_now_moves_along_and_a_consume_moves_the_master_conversation(
    settings: Settings, tmp_path: Path
) -> None:
    settings = settings.model_copy(update={"app_id": f"test-{uuid.uuid4().hex[:8]}"})
    await ensure_topics(settings)
    port = free_port()
    data = tmp_path / "worker"
    api = f"http://127.0.0.1:{port}"
    worker = WorkerProcess(settings, data, CTXBUDGET_API_PORT=str(port), CTXBUDGET_STALE_FACTOR="1000").start()
    try:
        async with Outputs(settings) as outputs:
            await asyncio.to_thread(get_when_up, f"{api}/healthz", 90, worker.alive)
            secret = token_secret(Settings(data_dir=data), ApiSettings())
            user = issue_token(secret, Role.USER, "kris", [PROJECT], ttl=timedelta(hours=1))
            operator = issue_token(secret, Role.OPERATOR, "ops", ttl=timedelta(hours=1))
            master = Conversation(
                conversation_id="conv-master",
                conversation_type=ConversationType.MASTER_AGENT,
                project_id=PROJECT,
                project_title="master",
                thread_ids=["thread-a"],
                updated_at=datetime.now(UTC),
            )
            await produce(
                settings,
                [
                    ("conversations", master.conversation_id, master),
                    ("snapshots", "thread-a", now_snapshot(30.0, "thread-a", 1)),
                    ("snapshots", "thread-b", now_snapshot(30.0, "thread-b", 1)),
                ],
            )
            both = [("thread-a", None), ("thread-b", None)]
            await outputs.wait_for(lambda o: view_order(o) == both, within=90, what="both threads ranked by id")

            # 1. importance: thread-b outranks its equal once a user sets its task's importance
            url = f"{api}/api/v1/threads/thread-b/task-importance"
            await until_status("PUT", url, user, {"task_importance": 9}, 202, within=30)
            ranked = [("thread-b", 9), ("thread-a", None)]
            await outputs.wait_for(lambda o: view_order(o) == ranked, within=60, what="thread-b ranked first")
            deadline = time.monotonic() + 60
            while True:  # the BFF reads ClickHouse: 404 until the sink has written the view, then older views
                code, detail = await asyncio.to_thread(send, "GET", f"{api}/api/v1/projects/{PROJECT}", user)
                contexts = detail["active_thread_contexts"] if code == 200 else []
                shown = [(t["thread_id"], t.get("task_importance")) for t in contexts]
                if shown == ranked or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.5)
            assert shown == ranked

            # 2. compact_now: issued, acknowledged by the master, done when the thread's compaction is seen
            await until_status("POST", f"{api}/api/v1/threads/thread-a/compaction-requests", user, None, 202, 30)

            def compact_now(o: Outputs) -> list[dict[str, Any]]:
                return [r for r in o.of_thread("master-actions", "thread-a") if r["actions"] == ["compact_now"]]

            await outputs.wait_for(lambda o: bool(compact_now(o)), within=60, what="compact_now issued")
            action_id = compact_now(outputs)[0]["action_id"]
            await until_status("POST", f"{api}/api/v1/master-actions/{action_id}/ack", user, None, 202, 60)
            await outputs.wait_for(
                lambda o: compact_now(o)[-1]["state"] == "acknowledged", within=60, what="compact_now acknowledged"
            )
            await produce(settings, [("snapshots", "thread-a", now_snapshot(12.0, "thread-a", 2, compactions=1))])
            await outputs.wait_for(lambda o: compact_now(o)[-1]["state"] == "done", within=60, what="compact_now done")
            assert compact_now(outputs)[-1]["state_reason"] == "compacted"

            # 3. spec 7.3: the main thread's package consumed into a relay moves the master conversation there
            ready = HandoffPackage(
                handoff_package_id="hp-master-1",
                project_id=PROJECT,
                from_thread_id="thread-a",
                package_status="ready",
                summary_text="the state of the work",
                critical_files=["a.py"],
                created_at=datetime.now(UTC),
                ready_at=datetime.now(UTC),
            )
            await produce(
                settings,
                [
                    ("handoff-packages", "thread-a", ready),
                    ("snapshots", "thread-relay", now_snapshot(96.0, "thread-relay", 1)),
                ],
            )
            consume = f"{api}/api/v1/handoff-packages/hp-master-1/consume"
            await until_status("POST", consume, user, {"to_thread_id": "thread-relay"}, 202, within=60)
            listed = await until_listed(api, operator, "conv-master", within=60)
            deadline = time.monotonic() + 60
            while listed["context_budget_indicator"]["percent"] != 96 and time.monotonic() < deadline:
                await asyncio.sleep(0.5)
                listed = await until_listed(api, operator, "conv-master", within=10)
            assert listed["context_budget_indicator"]["percent"] == 96  # the relay's ring, no longer thread-a's 12
        assert worker.stop() == 0, worker.output()

        # 4. the importance survives a restart: the engine's slots (their routes) come back from its changelog
        worker = WorkerProcess(settings, data, CTXBUDGET_API_PORT=str(port), CTXBUDGET_STALE_FACTOR="1000").start()
        async with Outputs(settings) as outputs:
            await asyncio.to_thread(get_when_up, f"{api}/healthz", 90, worker.alive)
            await produce(settings, [("snapshots", "thread-b", now_snapshot(27.0, "thread-b", 2))])

            def fresh_b(o: Outputs) -> list[dict[str, Any]]:
                views = [v for v in o.records["project-risk"] if v["project_id"] == PROJECT]
                threads = (t for v in views for t in v["active_thread_contexts"] if t["thread_id"] == "thread-b")
                return [t for t in threads if t["context_budget_remaining_pct"] == 27.0]  # the state sent after it

            await outputs.wait_for(lambda o: bool(fresh_b(o)), within=120, what="a view after the restart")
            assert fresh_b(outputs)[-1]["task_importance"] == 9
    finally:
        assert worker.stop() == 0, worker.output()

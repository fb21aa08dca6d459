"""A stand-in for the three API routes a worker's hooks call, over real HTTP, with state a test moves along:
`GET /api/v1/threads/{id}/context-budget`, `GET /api/v1/handoff-packages/{id}`, `POST .../{id}/consume`.

Its answers have the shapes of api/views.py's ThreadContextDetail and schemas.HandoffPackage (they are built from
those models), so a hook tested against it reads what the real API sends. The real API, against the real pipeline,
is tests/integration/test_hooks_pipeline.py's."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from api.views import ThreadContextDetail
from schemas import HandoffPackage, MasterAction, MasterActionItem, MasterActionState, PackageStatus
from schemas.enums import ContextBudgetLevel

NOW = datetime(2026, 3, 25, 8, 0, tzinfo=UTC)


class FakeBudgetApi:
    def __init__(self) -> None:
        self.details: dict[str, dict[str, Any]] = {}
        self.packages: dict[str, HandoffPackage] = {}
        self.requests: list[tuple[str, str]] = []
        self.down = False
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                fake.requests.append(("GET", self.path))
                parts = self.path.strip("/").split("/")
                if parts[:3] == ["api", "v1", "threads"] and parts[4:] == ["context-budget"]:
                    detail = fake.details.get(parts[3])
                    self._answer(
                        None if detail is None else ThreadContextDetail.model_validate_json(json.dumps(detail))
                    )
                elif parts[:3] == ["api", "v1", "handoff-packages"] and len(parts) == 4:
                    self._answer(fake.packages.get(parts[3]))
                else:
                    self._answer(None)

            def do_POST(self) -> None:
                fake.requests.append(("POST", self.path))
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                parts = self.path.strip("/").split("/")
                package = fake.packages.get(parts[3]) if parts[4:] == ["consume"] else None
                if package is not None:
                    package = package.model_copy(
                        update={
                            "package_status": PackageStatus.CONSUMED,
                            "to_thread_id": body["to_thread_id"],
                            "consumed_at": NOW,
                        }
                    )
                    fake.packages[package.handoff_package_id] = package
                self._answer(package, 202)

            def _answer(self, record: ThreadContextDetail | HandoffPackage | None, status: int = 200) -> None:
                if fake.down:
                    status, body = 503, b'{"detail": "down"}'
                elif record is None:
                    status, body = 404, b'{"detail": "not found"}'
                else:
                    body = record.model_dump_json().encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def thread(self, thread_id: str, **fields: Any) -> None:
        """Sets fields of the thread's detail (JSON values); a new thread starts 25% left, critical, owing nothing."""
        detail = self.details.get(thread_id) or {
            "thread_id": thread_id,
            "project_id": "proj-001",
            "context_budget_remaining_pct": 25.0,
            "context_budget_level": ContextBudgetLevel.CRITICAL.value,
            "updated_at": NOW.isoformat(),
            "compaction_history": {"compaction_count": 0},
        }
        self.details[thread_id] = detail | fields

    def owe(self, thread_id: str, action_id: str, action: MasterAction = MasterAction.PREPARE_HANDOFF) -> None:
        item = MasterActionItem(
            action_id=action_id,
            action=action,
            state=MasterActionState.ISSUED,
            context_budget_level=ContextBudgetLevel.CRITICAL,
            issued_at=NOW,
            state_changed_at=NOW,
        ).model_dump(mode="json")
        detail = self.details[thread_id]
        self.thread(
            thread_id,
            pending_master_actions=[*detail.get("pending_master_actions", []), action.value],
            open_master_actions=[*detail.get("open_master_actions", []), item],
        )

    def post_package(self, package: HandoffPackage) -> None:
        """The package as the engine would keep it: the thread's current one; a ready one closes the owed actions."""
        self.packages[package.handoff_package_id] = package
        fields: dict[str, Any] = {
            "handoff_package_id": package.handoff_package_id,
            "handoff_package_status": package.package_status.value,
        }
        if package.package_status is PackageStatus.READY:
            fields |= {"open_master_actions": [], "pending_master_actions": []}
        self.thread(package.from_thread_id, **fields)

    def serve(self) -> Iterator[FakeBudgetApi]:
        thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self.httpd.shutdown()
            self.httpd.server_close()


def sample_package(thread_id: str, status: PackageStatus = PackageStatus.READY, **fields: object) -> HandoffPackage:
    """A package as relay assembles one: the agent's part and the worker's facts, the saved diff among artifacts."""
    body = {
        "handoff_package_id": f"hp-{thread_id[:8]}",
        "project_id": "proj-001",
        "from_thread_id": thread_id,
        "package_status": status,
        "summary_text": "Parser rewritten; two edge cases left.",
        "open_questions": ["Keep the legacy flag?"],
        "critical_files": ["src/parser.py"],
        "critical_commands": ["pytest tests/parser -q: 2 failed"],
        "critical_tests": ["tests/parser: 2 failed (empty input, BOM)"],
        "critical_artifacts": ["var/handoff/hp-1/uncommitted.patch", "logs/run-12.txt"],
        "decision_links": ["docs/adr/007-parser.md"],
        "created_at": NOW,
        "ready_at": NOW if status is not PackageStatus.DRAFT else None,
    }
    return HandoffPackage.model_validate(body | fields)

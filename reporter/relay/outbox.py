"""What the relay owes the pipeline (action acks and dones, package versions), kept on disk until delivered.

The relay never loses one: each entry is saved (atomic rewrite of a small JSON-lines file) before delivery is tried,
and leaves only once the receiver took it, or refused it for good, in which case it is appended with the reason to
`rejected.jsonl` beside the spool, like a rejected snapshot. Within a thread, packages keep their order (a draft before
its ready version) and commands keep theirs (an ack before its done); a command the API cannot place yet (404: the
action has not reached its store) holds back no package.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from pathlib import Path
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict

from reporter.atomic_file import write_atomically
from reporter.delivery import DeliveryError, RejectedRecord
from schemas import HandoffPackage, MasterActionCommandKind

log = logging.getLogger(__name__)

OUTBOX_NAME = "relay_outbox.jsonl"


class RelayDeliverer(Protocol):
    async def send_package(self, package: HandoffPackage) -> None: ...

    async def send_action_command(self, action_id: str, thread_id: str, command: MasterActionCommandKind) -> None: ...


class Owed(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["package", "command"]
    thread_id: str
    package: HandoffPackage | None = None
    action_id: str | None = None
    command: MasterActionCommandKind | None = None

    @classmethod
    def of_package(cls, package: HandoffPackage) -> Owed:
        return cls(kind="package", thread_id=package.from_thread_id, package=package)

    @classmethod
    def of_command(cls, action_id: str, thread_id: str, command: MasterActionCommandKind) -> Owed:
        return cls(kind="command", thread_id=thread_id, action_id=action_id, command=command)


class RelayOutbox:
    def __init__(self, path: Path, rejected_path: Path) -> None:
        self.path = path
        self.rejected_path = rejected_path
        self.delivered = 0
        self.rejected = 0
        self._delivering = asyncio.Lock()
        self._owed: list[Owed] = (
            [Owed.model_validate_json(line) for line in path.read_bytes().splitlines() if line.strip()]
            if path.exists()
            else []
        )

    def __len__(self) -> int:
        return len(self._owed)

    def owed(self) -> list[Owed]:
        return list(self._owed)

    def add(self, *entries: Owed) -> None:
        self._owed.extend(entries)
        self._save()

    async def deliver(self, to: RelayDeliverer) -> DeliveryError | None:
        """Try every entry once, in order; returns the last failure (None: everything owed was delivered)."""
        async with self._delivering:  # the relay's tasks flush at once: each entry goes out once
            return await self._deliver(to)

    async def _deliver(self, to: RelayDeliverer) -> DeliveryError | None:
        failure: DeliveryError | None = None
        blocked: set[tuple[str, str]] = set()
        for entry in list(self._owed):
            lane = (entry.thread_id, entry.kind)
            if lane in blocked:
                continue
            try:
                await _send(to, entry)
            except DeliveryError as error:
                blocked.add(lane)
                failure = error
                continue
            except RejectedRecord as error:
                self._set_aside(entry, str(error))
            else:
                self.delivered += 1
            self._owed.remove(entry)
            self._save()
        return failure

    def _save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(self.path, b"".join(entry.model_dump_json().encode() + b"\n" for entry in self._owed))

    def _set_aside(self, entry: Owed, reason: str) -> None:
        line = json.dumps({"reason": reason, "relay": entry.model_dump(mode="json")}, ensure_ascii=False)
        self.rejected_path.parent.mkdir(parents=True, exist_ok=True)
        with self.rejected_path.open("a", encoding="utf-8") as out:
            out.write(line + "\n")
            out.flush()
            os.fsync(out.fileno())
        self.rejected += 1
        log.error("relay: the receiver refused a %s of thread %r (set aside): %s", entry.kind, entry.thread_id, reason)


async def _send(to: RelayDeliverer, entry: Owed) -> None:
    if entry.package is not None:
        await to.send_package(entry.package)
    elif entry.action_id is not None and entry.command is not None:
        await to.send_action_command(entry.action_id, entry.thread_id, entry.command)

"""Acks re-keyed by the thread that owns the alert (a repartition), so the engine sees them in order with the rest
of the thread's records."""

from __future__ import annotations

from datetime import datetime

from core.topics import ALERT_COMMANDS_BY_THREAD
from schemas import DecodeError
from streams.batching import Emit, InputMessage, dead_letter
from streams.engine.batch import ALERT_COMMAND_CODEC


def route_alert_commands(messages: list[InputMessage], now: datetime, prefix: str) -> list[Emit]:
    """Each command to `alert-commands-by-thread` under its thread id; one that does not decode, dead-lettered."""
    emits = []
    for message in messages:
        try:
            command = ALERT_COMMAND_CODEC.decode(message.value)
        except DecodeError as error:
            emits.append(dead_letter(message, error.reason, error.detail, now, prefix))
            continue
        emits.append(Emit(ALERT_COMMANDS_BY_THREAD, command.thread_id, command))
    return emits

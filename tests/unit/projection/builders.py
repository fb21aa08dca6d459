"""Session-event builders for projection tests: each test states only the numbers that matter to it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import count

from schemas import TriggerMode
from schemas.session_events import (
    CompactionCompleted,
    CompactionStarted,
    CompactionSummary,
    CompactRequested,
    ContextManifest,
    ContextSection,
    MessageAdded,
    ToolResultAdded,
    UsageSample,
)

T0 = datetime(2026, 3, 25, 8, 0, tzinfo=UTC)
THREAD = "thread-a"
_ids = count(1)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def _base(seconds: float, event_id: str | None) -> dict:
    return {"thread_id": THREAD, "event_id": event_id or f"ev-{next(_ids)}", "occurred_at": at(seconds)}


def usage(tokens: int, seconds: float = 0, *, model: str | None = None, window: int | None = None,
          event_id: str | None = None) -> UsageSample:  # fmt: skip
    return UsageSample(**_base(seconds, event_id), input_tokens=tokens, model=model, context_window_tokens=window)


def message(tokens: int | None = None, seconds: float = 0, *, text: str | None = None,
            event_id: str | None = None) -> MessageAdded:  # fmt: skip
    return MessageAdded(**_base(seconds, event_id), role="user", text=text, token_count=tokens)


def tool_result(tokens: int, seconds: float = 0, *, truncated: bool = False, event_id: str | None = None
                ) -> ToolResultAdded:  # fmt: skip
    return ToolResultAdded(**_base(seconds, event_id), tool_name="read_file", token_count=tokens, truncated=truncated)


def manifest(sections: dict[str, int], window: int | None = None, seconds: float = 0) -> ContextManifest:
    rows = [ContextSection(key=k, label=k, tokens=v) for k, v in sections.items()]
    return ContextManifest(**_base(seconds, None), sections=rows, estimated_window_tokens=window)


def started(seconds: float = 0, mode: TriggerMode = TriggerMode.MANUAL, before: int | None = None
            ) -> CompactionStarted:  # fmt: skip
    return CompactionStarted(**_base(seconds, None), trigger_mode=mode, tokens_before=before)


def summary(tokens: int, seconds: float = 0, *, through: str | None = None, text: str | None = None,
            mode: TriggerMode = TriggerMode.MANUAL) -> CompactionSummary:  # fmt: skip
    return CompactionSummary(
        **_base(seconds, None),
        trigger_mode=mode,
        summary_text=text,
        summary_token_count=None if text is not None else tokens,
        replaced_through_event_id=through,
    )


def completed(seconds: float = 0, *, before: int | None = None, after: int | None = None,
              mode: TriggerMode = TriggerMode.MANUAL) -> CompactionCompleted:  # fmt: skip
    return CompactionCompleted(**_base(seconds, None), trigger_mode=mode, tokens_before=before, tokens_after=after)


def compact_requested(seconds: float = 0) -> CompactRequested:
    return CompactRequested(**_base(seconds, None), requested_by="user-1")

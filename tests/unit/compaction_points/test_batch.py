"""The compactions' re-keying by point and the points' batch: what teaches nothing is skipped, bad input is
dead-lettered whole, and a sample keyed under another point is refused."""

from __future__ import annotations

from core.profiles import ProfileSet
from core.topics import COMPACTION_SAMPLES, COMPACTIONS, DEADLETTER
from schemas import DeadLetter
from schemas.codec import encode_record
from streams.batching import InputMessage
from streams.compaction_points.batch import points_batch, route_compactions
from tests.unit.compaction_points.builders import T0, finished

KEY = "claude-code|2.1.x|claude-sonnet-4-5|200000"


def message(topic: str, key: str, value: bytes, offset: int = 0) -> InputMessage:
    return InputMessage(topic, 0, offset, key.encode(), value)


def test_compactions_are_rekeyed_by_the_point_they_teach_and_bad_ones_dead_lettered() -> None:
    taught = finished(176_000, 0)
    windowless = finished(176_000, 1).model_copy(update={"context_window_tokens": None})  # an older projection's
    messages = [
        message(COMPACTIONS, taught.thread_id, encode_record(taught)),
        message(COMPACTIONS, windowless.thread_id, encode_record(windowless), 1),
        message(COMPACTIONS, "thread-x", b'{"event_id": 7}', 2),
    ]
    routed, dead = route_compactions(messages, T0, "ctx.")
    assert (routed.topic, routed.key, routed.record) == (COMPACTION_SAMPLES, KEY, taught)
    assert dead.topic == DEADLETTER
    assert isinstance(dead.record, DeadLetter)
    assert (dead.record.reason, dead.record.original_value) == ("validation_error", b'{"event_id": 7}')


def test_a_sample_under_another_points_key_or_of_an_unknown_profile_is_dead_lettered() -> None:
    misplaced = finished(176_000, 0)
    unknown = finished(176_000, 1, tool="kimi")
    messages = [
        message(COMPACTION_SAMPLES, "codex|0.169.x|gpt-5.5|258400", encode_record(misplaced)),
        message(COMPACTION_SAMPLES, "kimi|2.1.x|claude-sonnet-4-5|200000", encode_record(unknown), 1),
    ]
    result = points_batch(messages, {}.get, T0, ProfileSet(), "ctx.")
    assert result.states == {}
    assert [e.record.reason for e in result.emits if isinstance(e.record, DeadLetter)] == [
        "key_mismatch",
        "unknown_profile",
    ]

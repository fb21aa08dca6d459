"""Every instant the API returns is RFC 3339 in UTC with `Z`, whatever offset it was reported with (issue 19.13)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import orjson

from api.events import to_delivery
from api.responses import in_utc, utc_json
from api.views import CompactionHistory
from schemas import ThreadHandoffRequired
from schemas.codec import encode_record
from tests.unit.api.events_builders import raw_record
from tests.unit.sinks.records import compaction

BEIJING = timezone(timedelta(hours=8))
LOCAL = datetime(2026, 3, 25, 15, 56, tzinfo=BEIJING)
EVENT = ThreadHandoffRequired(
    event_id="ev-1", occurred_at=LOCAL, project_id="p", thread_id="t", context_budget_level="critical"
)


def test_an_instant_is_sent_in_utc_with_z_and_stays_the_same_instant() -> None:
    text = orjson.loads(utc_json(EVENT))["occurred_at"]
    assert text == "2026-03-25T07:56:00Z"
    assert datetime.fromisoformat(text) == LOCAL


def test_instants_inside_nested_records_and_lists_move_to_utc_too() -> None:
    finished = compaction("t", "p")
    local = finished.model_copy(update={"completed_at": finished.completed_at.astimezone(BEIJING)})
    body = orjson.loads(utc_json(CompactionHistory(compaction_count=1, recent=[local])))
    assert body["recent"][0]["completed_at"].endswith("Z")


def test_sse_events_carry_utc_instants() -> None:
    delivery = to_delivery(raw_record(0, 0, encode_record(EVENT), b"p"))
    assert delivery is not None
    data = delivery.body.split(b"\ndata: ")[1]
    assert orjson.loads(data)["occurred_at"] == "2026-03-25T07:56:00Z"


def test_a_record_whose_instants_are_all_in_utc_is_encoded_as_it_is_and_only_the_others_are_copied() -> None:
    in_utc_already = EVENT.model_copy(update={"occurred_at": LOCAL.astimezone(UTC)})
    assert in_utc(in_utc_already) is in_utc_already
    finished = compaction("t", "p")
    local = finished.model_copy(update={"completed_at": finished.completed_at.astimezone(BEIJING)})
    moved = in_utc(CompactionHistory(compaction_count=2, recent=[finished, local]))
    assert moved.recent[0] is finished
    assert moved.recent[1].completed_at.utcoffset() == timedelta(0)
    assert moved.recent[1].completed_at == local.completed_at

"""The policies' global table keeps its plain map of decoded policies current through both of its writers."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from faust.types import TP

from core.settings import Settings
from schemas import Codec, ThresholdPolicy
from schemas.codec import encode_record
from streams.runtime.agents import RAW
from streams.runtime.app import create_app
from streams.runtime.policy_table import MirroredTable

STRICT = ThresholdPolicy(project_id="proj-hw", safe_min_pct=80, watch_min_pct=60, urgent_min_pct=45)
FLEET = ThresholdPolicy(project_id="*", safe_min_pct=70)


@dataclass
class Message:
    key: bytes
    value: bytes | None
    partition: int = 0


@dataclass
class ChangelogEvent:
    """What Faust's changelog reader hands a table: the record's key and value, and the message they came in."""

    key: bytes
    value: bytes | None
    partition: int = 0

    @property
    def message(self) -> Message:
        return Message(self.key, self.value, self.partition)


def _event(policy: ThresholdPolicy, partition: int = 0) -> ChangelogEvent:
    return ChangelogEvent(policy.project_id.encode(), encode_record(policy), partition)


@pytest.fixture
def table(tmp_path: Path) -> MirroredTable:
    app = create_app(Settings(kafka_bootstrap_servers="127.0.0.1:9", data_dir=tmp_path))
    return MirroredTable.register(app, "policies", 4, Codec(ThresholdPolicy).decode, **RAW)


def test_a_policy_the_worker_stores_is_looked_up_from_the_map(table: MirroredTable) -> None:
    table.put(b"proj-hw", encode_record(STRICT))
    assert table.mirror.get("proj-hw") == STRICT
    assert table.get(b"proj-hw") == encode_record(STRICT)  # the table holds it too (its changelog, its readers)
    assert table.mirror.get("proj-other") is None


def test_the_changelog_reader_adds_replaces_and_deletes_policies_in_the_map(table: MirroredTable) -> None:
    stricter = STRICT.model_copy(update={"safe_min_pct": 90})
    table.apply_changelog_batch([_event(STRICT), _event(FLEET), _event(stricter)])
    assert table.mirror == {"proj-hw": stricter, "*": FLEET}  # the batch's last record of a key wins
    table.apply_changelog_batch([ChangelogEvent(b"*", None)])  # a tombstone
    assert table.mirror == {"proj-hw": stricter}
    assert table.get(b"*") is None


async def test_keys_the_store_lets_go_of_at_recovery_leave_the_map(table: MirroredTable) -> None:
    table.apply_changelog_batch([_event(STRICT, partition=0), _event(FLEET, partition=1)])
    # the memory store drops the keys of changelog partitions not assigned when recovery completes
    await table.on_recovery_completed({TP(table.changelog_topic.get_topic_name(), 0)}, set())
    assert table.get(b"*") is None
    assert table.mirror == {"proj-hw": STRICT}

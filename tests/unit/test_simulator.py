"""The fleet simulator: replayable byte for byte, each record is what its kind says, and the fleet behaves like one."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections import Counter, defaultdict
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from pathlib import Path

import pytest

from schemas import (
    SESSION_EVENT_ADAPTER,
    Codec,
    CompactionCompleted,
    CompactionStarted,
    ContextBudgetLevel,
    Conversation,
    ConversationType,
    DecodeError,
    HandoffPackage,
    PackageStatus,
    SourceKind,
    ThreadContextSnapshot,
    WorkFactChanged,
)
from streams.simulator import SimRecord, SimulationConfig, generate, live_traffic, registry, worker_id_of

SNAPSHOTS = Codec(ThreadContextSnapshot)
EVENTS = Codec(SESSION_EVENT_ADAPTER)
PACKAGES = Codec(HandoffPackage)
CONVERSATIONS = Codec(Conversation)
CODECS: dict[str, Codec] = {"snapshots": SNAPSHOTS, "session-events": EVENTS, "handoff-packages": PACKAGES}

LONG = SimulationConfig(threads=12, turns_per_thread=150, seed=7)
"""Long enough that every thread compacts at least once."""
NOISY = SimulationConfig(
    threads=20, turns_per_thread=200, seed=3, duplicate_rate=0.05, late_rate=0.05, invalid_rate=0.05, mismatch_rate=0.2
)
QUIET = SimulationConfig(
    threads=10, turns_per_thread=100, duplicate_rate=0, late_rate=0, invalid_rate=0, mismatch_rate=0, estimator_rate=0
)
REPO = Path(__file__).resolve().parents[2]


def expected_level(pct: float) -> ContextBudgetLevel:
    """Spec 4's default bands, written out independently of the code under test."""
    return (
        ContextBudgetLevel.SAFE
        if pct >= 60
        else ContextBudgetLevel.WATCH
        if pct >= 40
        else ContextBudgetLevel.URGENT
        if pct >= 25
        else ContextBudgetLevel.CRITICAL
    )


def digest(records: list[SimRecord]) -> str:
    hasher = hashlib.sha256()
    for record in records:
        hasher.update(b"\0".join((record.topic.encode(), record.key, record.value, record.kind.encode())) + b"\n")
    return hasher.hexdigest()


def valid_snapshots(records: list[SimRecord]) -> list[ThreadContextSnapshot]:
    return [SNAPSHOTS.decode(r.value) for r in records if r.topic == "snapshots" and r.kind == "valid"]


def primary_snapshots(records: list[SimRecord]) -> dict[str, list[ThreadContextSnapshot]]:
    """Each thread's snapshots from its primary source (the source of its first snapshot), in generation order."""
    by_thread: dict[str, list[ThreadContextSnapshot]] = defaultdict(list)
    for snapshot in valid_snapshots(records):
        primary = by_thread[snapshot.thread_id][0].source_kind if by_thread[snapshot.thread_id] else None
        if primary in (None, snapshot.source_kind):
            by_thread[snapshot.thread_id].append(snapshot)
    return by_thread


@pytest.fixture(scope="module")
def long_run() -> list[SimRecord]:
    return list(generate(LONG))


@pytest.fixture(scope="module")
def noisy_run() -> list[SimRecord]:
    return list(generate(NOISY))


def test_same_seed_gives_the_same_bytes() -> None:
    assert list(generate(SimulationConfig())) == list(generate(SimulationConfig()))


def test_another_seed_gives_other_bytes() -> None:
    assert digest(list(generate(SimulationConfig(seed=1)))) != digest(list(generate(SimulationConfig(seed=2))))


def test_same_bytes_in_another_process_with_another_hash_seed() -> None:
    """Nothing depends on set or dict-of-str iteration order, which PYTHONHASHSEED changes between processes."""
    script = (
        "from streams.simulator import SimulationConfig, generate; from tests.unit.test_simulator import digest; "
        "print(digest(list(generate(SimulationConfig()))))"
    )
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        result = subprocess.run(
            [sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True, check=True
        )
        assert result.stdout.strip() == digest(list(generate(SimulationConfig())))


def test_every_valid_late_and_duplicate_record_decodes_with_its_topics_codec(noisy_run: list[SimRecord]) -> None:
    kinds = Counter(record.kind for record in noisy_run)
    assert {"valid", "late", "duplicate", "invalid"} <= kinds.keys()
    for record in noisy_run:
        if record.kind == "invalid":
            continue
        decoded = CODECS[record.topic].decode(record.value)
        owner = decoded.from_thread_id if isinstance(decoded, HandoffPackage) else decoded.thread_id
        assert record.key == owner.encode()


def test_every_invalid_record_is_rejected_by_the_snapshot_codec(noisy_run: list[SimRecord]) -> None:
    invalid = [record for record in noisy_run if record.kind == "invalid"]
    assert all(record.topic == "snapshots" for record in invalid)
    reasons: set[str] = set()
    for record in invalid:
        with pytest.raises(DecodeError) as caught:
            SNAPSHOTS.decode(record.value)
        reasons.add(caught.value.reason if caught.value.reason == "invalid_json" else caught.value.detail.split(":")[0])
    assert reasons == {
        "invalid_json",
        "context_budget_remaining_pct",
        "captured_at",
        "context_budget_level",
        "thread_id",
    }


def test_snapshot_versions_strictly_increase_per_thread_and_source(noisy_run: list[SimRecord]) -> None:
    last: dict[tuple[str, SourceKind], int] = {}
    for snapshot in valid_snapshots(noisy_run):
        key = (snapshot.thread_id, snapshot.source_kind)
        assert snapshot.snapshot_version > last.get(key, 0)
        last[key] = snapshot.snapshot_version


def test_duplicates_repeat_the_newest_snapshot_and_late_ones_an_older_one(noisy_run: list[SimRecord]) -> None:
    sent: dict[bytes, list[bytes]] = defaultdict(list)  # each thread's valid primary snapshots so far
    primary: dict[bytes, SourceKind] = {}
    for record in noisy_run:
        if record.topic != "snapshots" or record.kind == "invalid":
            continue
        if record.kind == "duplicate":
            assert record.value == sent[record.key][-1]
        elif record.kind == "late":
            assert record.value in sent[record.key][:-1]
        else:
            source = SNAPSHOTS.decode(record.value).source_kind
            if primary.setdefault(record.key, source) is source:
                sent[record.key].append(record.value)


def test_captured_at_is_utc_and_advances_per_thread_and_source(long_run: list[SimRecord]) -> None:
    last: dict[tuple[str, SourceKind], ThreadContextSnapshot] = {}
    for snapshot in valid_snapshots(long_run):
        assert snapshot.captured_at.utcoffset() is not None
        assert snapshot.captured_at.utcoffset().total_seconds() == 0
        assert snapshot.captured_at >= LONG.start
        previous = last.get((snapshot.thread_id, snapshot.source_kind))
        assert previous is None or snapshot.captured_at > previous.captured_at
        last[(snapshot.thread_id, snapshot.source_kind)] = snapshot


def test_budgets_drop_then_recover_after_each_compaction(long_run: list[SimRecord]) -> None:
    threads = primary_snapshots(long_run)
    assert len(threads) == LONG.threads
    for snapshots in threads.values():
        assert snapshots[-1].compaction_count >= 1
        for before, after in pairwise(snapshots):
            if after.compaction_count == before.compaction_count:
                assert after.context_budget_remaining_pct < before.context_budget_remaining_pct
                assert after.last_compaction_at == before.last_compaction_at
            else:
                assert after.compaction_count == before.compaction_count + 1
                assert 70 <= after.context_budget_remaining_pct <= 95
                assert after.last_compaction_at is not None
                assert before.captured_at < after.last_compaction_at <= after.captured_at


def test_each_compaction_is_bracketed_by_started_and_completed_events(long_run: list[SimRecord]) -> None:
    events: dict[str, list[object]] = defaultdict(list)
    for record in long_run:
        if record.topic == "session-events":
            events[record.key.decode()].append(EVENTS.decode(record.value))
    for thread_id, snapshots in primary_snapshots(long_run).items():
        compactions = [e for e in events[thread_id] if isinstance(e, CompactionStarted | CompactionCompleted)]
        assert [type(e) for e in compactions] == [CompactionStarted, CompactionCompleted] * snapshots[
            -1
        ].compaction_count
        completed = [e.occurred_at for e in compactions if isinstance(e, CompactionCompleted)]
        assert snapshots[-1].last_compaction_at == completed[-1]
        ids = [e.event_id for e in events[thread_id]]
        assert len(ids) == len(set(ids))


def test_work_facts_are_set_active_then_resolved(long_run: list[SimRecord]) -> None:
    active: set[tuple[str, str]] = set()
    resolved = 0
    for record in long_run:
        if record.topic != "session-events":
            continue
        event = EVENTS.decode(record.value)
        if isinstance(event, WorkFactChanged):
            key = (event.thread_id, event.fact)
            assert (key in active) != event.active
            (active.add if event.active else active.discard)(key)
            resolved += not event.active
    assert resolved > 0


def test_handoff_packages_go_draft_ready_consumed_and_ready_ones_carry_the_checklist(long_run: list[SimRecord]) -> None:
    stages: dict[str, list[PackageStatus]] = defaultdict(list)
    consumed: Counter[str] = Counter()
    for record in long_run:
        if record.topic != "handoff-packages":
            continue
        package = PACKAGES.decode(record.value)
        stages[package.handoff_package_id].append(package.package_status)
        consumed[package.from_thread_id] += package.package_status is PackageStatus.CONSUMED
        if package.package_status is not PackageStatus.DRAFT:
            assert package.summary_text
            assert package.critical_files
            assert package.critical_commands
            assert package.critical_tests
    lifecycle = [PackageStatus.DRAFT, PackageStatus.READY, PackageStatus.CONSUMED]
    assert all(statuses == lifecycle[: len(statuses)] for statuses in stages.values())
    for thread_id, snapshots in primary_snapshots(long_run).items():
        assert consumed[thread_id] == snapshots[-1].compaction_count


def test_reported_levels_follow_the_default_thresholds_unless_deliberately_wrong(noisy_run: list[SimRecord]) -> None:
    assert all(
        s.context_budget_level is expected_level(s.context_budget_remaining_pct)
        for s in valid_snapshots(list(generate(QUIET)))
    )
    snapshots = valid_snapshots(noisy_run)
    wrong = sum(s.context_budget_level is not expected_level(s.context_budget_remaining_pct) for s in snapshots)
    assert 0.5 * NOISY.mismatch_rate < wrong / len(snapshots) < 1.5 * NOISY.mismatch_rate
    assert {expected_level(s.context_budget_remaining_pct) for s in snapshots} == set(ContextBudgetLevel)


def test_must_finish_only_when_urgent_or_critical(long_run: list[SimRecord]) -> None:
    snapshots = [s for s in valid_snapshots(long_run) if s.must_finish_before_compaction]
    assert snapshots
    low = {ContextBudgetLevel.URGENT, ContextBudgetLevel.CRITICAL}
    assert all(expected_level(s.context_budget_remaining_pct) in low for s in snapshots)


def test_compaction_is_forecast_ahead(long_run: list[SimRecord]) -> None:
    for snapshot in valid_snapshots(long_run):
        assert snapshot.compaction_expected_at is not None
        assert snapshot.compaction_expected_at > snapshot.captured_at
        assert snapshot.estimated_remaining_turns is not None


def test_sources_are_mixed_and_codex_threads_get_occasional_estimates(long_run: list[SimRecord]) -> None:
    sources: dict[str, Counter[SourceKind]] = defaultdict(Counter)
    for snapshot in valid_snapshots(long_run):
        sources[snapshot.thread_id][snapshot.source_kind] += 1
    primaries = {counts.most_common(1)[0][0] for counts in sources.values()}
    assert len(primaries) >= 2
    estimated = [c for c in sources.values() if len(c) == 2]
    assert estimated
    assert all(c[SourceKind.WORKER_ESTIMATOR] < c.most_common(1)[0][1] for c in estimated)


def test_imperfection_rates_are_roughly_respected(noisy_run: list[SimRecord]) -> None:
    kinds = Counter(record.kind for record in noisy_run)
    primaries = NOISY.threads * NOISY.turns_per_thread
    for kind, rate in (("duplicate", NOISY.duplicate_rate), ("late", NOISY.late_rate), ("invalid", NOISY.invalid_rate)):
        assert 0.5 * rate < kinds[kind] / primaries < 1.5 * rate, kind


def test_zero_rates_give_no_imperfections() -> None:
    records = list(generate(QUIET))
    assert {record.kind for record in records} == {"valid"}
    for snapshots in primary_snapshots(records).values():
        assert len(snapshots) == QUIET.turns_per_thread
    assert len(valid_snapshots(records)) == QUIET.threads * QUIET.turns_per_thread


@pytest.mark.parametrize(
    "changes",
    [{"threads": 0}, {"turns_per_thread": -1}, {"turn_seconds": 0}, {"late_rate": 1.5}, {"invalid_rate": -0.1}],
)
def test_config_rejects_nonsense(changes: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="must"):
        SimulationConfig(**changes)


def test_config_rejects_a_naive_start() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        SimulationConfig(start=LONG.start.replace(tzinfo=None))


def test_the_registry_shows_every_thread_alone_every_project_as_a_group_and_one_master_on_a_fleet_thread() -> None:
    config = SimulationConfig(threads=7, projects=3)
    records = registry(config)
    assert all(r.topic == "conversations" and r.kind == "valid" for r in records)
    conversations = [CONVERSATIONS.decode(r.value) for r in records]
    assert [r.key.decode() for r in records] == [c.conversation_id for c in conversations]
    by_type = defaultdict(list)
    for conversation in conversations:
        by_type[conversation.conversation_type].append(conversation)
    fleet = {s.thread_id: s.project_id for s in valid_snapshots(list(generate(config)))}
    singles = {c.thread_ids[0]: c.project_id for c in by_type[ConversationType.SINGLE_DEVICE]}
    assert singles == fleet
    groups = {c.project_id: set(c.thread_ids) for c in by_type[ConversationType.GROUP]}
    assert groups == {p: {t for t, tp in fleet.items() if tp == p} for p in set(fleet.values())}
    [master] = by_type[ConversationType.MASTER_AGENT]
    assert len(master.thread_ids) == 1
    assert fleet[master.thread_ids[0]] == master.project_id


def test_live_traffic_registers_first_and_never_reports_a_time_ahead_of_the_clock() -> None:
    ticks = iter(range(10**9))
    start = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)

    def clock() -> datetime:  # a clock a millisecond further on each time it is read
        return start + timedelta(milliseconds=next(ticks))

    config = SimulationConfig(threads=8, turns_per_thread=120, seed=4, start=start, clock=clock)
    records = list(live_traffic(config))
    assert {r.topic for r in records[: len(registry(config))]} == {"conversations"}
    read_last = clock()
    times: list[datetime] = []
    for record in records:
        if record.kind == "invalid" or record.topic == "conversations":
            continue
        value = CODECS[record.topic].decode(record.value)
        times += [
            t
            for t in (
                getattr(value, name, None)
                for name in (
                    "captured_at",
                    "last_compaction_at",
                    "occurred_at",
                    "created_at",
                    "ready_at",
                    "consumed_at",
                )
            )
            if t is not None
        ]
    assert times
    assert max(times) <= read_last
    assert min(times) >= start - timedelta(seconds=config.turn_seconds)
    compactions = [v for r in records if r.topic == "session-events" for v in [EVENTS.decode(r.value)]]
    assert any(isinstance(e, CompactionCompleted) for e in compactions)
    for thread, snapshots in primary_snapshots(records).items():
        assert all(a.captured_at < b.captured_at for a, b in pairwise(snapshots)), thread


def test_a_fleet_without_self_handoff_posts_no_package_and_still_compacts() -> None:
    quiet = list(generate(replace(LONG, self_handoff=False)))
    assert [r for r in quiet if r.topic == "handoff-packages"] == []
    compactions = [r for r in quiet if r.topic == "session-events" and b'"compaction_completed"' in r.value]
    assert compactions
    assert len(compactions) == sum(
        1 for r in generate(LONG) if r.topic == "session-events" and b'"compaction_completed"' in r.value
    )


def test_worker_id_of_names_the_worker_whose_snapshots_the_thread_sends(long_run: list[SimRecord]) -> None:
    for thread_id, snapshots in primary_snapshots(long_run).items():
        assert {s.worker_id for s in snapshots} == {worker_id_of(thread_id)}

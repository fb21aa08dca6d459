from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from reporter.delivery.spool import LOG_NAME, Spool, read_frames
from schemas import SourceKind, ThreadContextSnapshot
from tests.samples import SNAPSHOT

BASE = ThreadContextSnapshot.model_validate_json(json.dumps(SNAPSHOT))


def snap(thread: str, version: int, source: SourceKind = SourceKind.CODEX_APP_SERVER) -> ThreadContextSnapshot:
    identity = {"thread_id": thread, "source_kind": source, "snapshot_version": version}
    return BASE.model_copy(update={**identity, "snapshot_id": f"{thread}-{version}"})


def ids(spool: Spool) -> list[str]:
    return [record.snapshot.snapshot_id for record in spool]


def test_records_come_out_in_the_order_they_went_in_also_after_a_restart(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    spool.append([snap("a", 1), snap("b", 1)])
    spool.append([snap("a", 2)])
    assert ids(spool) == ["a-1", "b-1", "a-2"]
    spool.close()
    reopened = Spool(tmp_path)
    assert ids(reopened) == ["a-1", "b-1", "a-2"]
    head = reopened.head()
    assert head is not None
    assert head.snapshot == snap("a", 1)


def test_a_record_leaves_only_when_removed_and_stays_removed_after_a_restart(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    spool.append([snap("a", 1), snap("a", 2), snap("a", 3)])
    head = spool.head()
    assert head is not None
    spool.remove(head.seq)
    spool.remove(head.seq)  # a second confirmation of the same record changes nothing
    spool.close()
    assert ids(Spool(tmp_path)) == ["a-2", "a-3"]


def test_a_record_confirmed_but_not_removed_before_a_crash_is_offered_again_unchanged(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    spool.append([snap("a", 1)])
    sent = spool.head()
    # the delivery confirmed it; the process dies before `remove`
    resent = Spool(tmp_path).head()
    assert sent is not None
    assert resent is not None
    assert resent.snapshot == sent.snapshot  # same id, version and captured_at: the engine drops it as not newer


def test_a_torn_write_at_the_end_is_cut_off_and_appending_goes_on_after_it(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    spool.append([snap("a", 1), snap("a", 2)])
    spool.close()
    log = tmp_path / LOG_NAME
    whole = log.read_bytes()
    spool = Spool(tmp_path)
    spool.append([snap("a", 3)])
    spool.close()
    third_frame = log.read_bytes()[len(whole) :]
    log.write_bytes(whole + third_frame[: len(third_frame) // 2])  # the crash came in the middle of the write

    reopened = Spool(tmp_path)
    assert ids(reopened) == ["a-1", "a-2"]
    assert log.read_bytes() == whole  # the torn frame is gone, so the next frame follows a good one
    reopened.append([snap("a", 4)])
    reopened.close()
    assert ids(Spool(tmp_path)) == ["a-1", "a-2", "a-4"]


def test_when_full_a_superseded_reading_of_the_same_thread_goes_first(tmp_path: Path) -> None:
    spool = Spool(tmp_path, max_records=3)
    spool.append([snap("a", 1), snap("b", 1), snap("a", 2), snap("c", 1)])
    assert ids(spool) == ["b-1", "a-2", "c-1"]
    assert spool.dropped == {"superseded": 1}


def test_a_newer_reading_of_another_source_does_not_supersede(tmp_path: Path) -> None:
    spool = Spool(tmp_path, max_records=2)
    spool.append([snap("a", 1), snap("a", 2, SourceKind.WORKER_ESTIMATOR), snap("b", 1)])
    assert ids(spool) == ["a-2", "b-1"]
    assert spool.dropped == {"overflow": 1}


def test_the_byte_bound_holds_like_the_count(tmp_path: Path) -> None:
    one = len(snap("a", 1).model_dump_json())
    spool = Spool(tmp_path, max_bytes=2 * one + 10)
    spool.append([snap("a", 1), snap("b", 1), snap("c", 1)])
    assert ids(spool) == ["b-1", "c-1"]
    assert spool.size_bytes <= spool.max_bytes


def test_an_emptied_spool_leaves_an_empty_log(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    spool.append([snap("a", v) for v in range(1, 6)])
    while (head := spool.head()) is not None:
        spool.remove(head.seq)
    assert (tmp_path / LOG_NAME).stat().st_size == 0
    spool.append([snap("a", 6)])
    spool.close()
    assert ids(Spool(tmp_path)) == ["a-6"]


appends = st.lists(st.tuples(st.sampled_from("abcd"), st.booleans()), max_size=40)


@settings(max_examples=40, deadline=None)
@given(appends, st.integers(min_value=1, max_value=6))
def test_the_spool_keeps_its_bound_its_order_and_each_threads_newest(steps: list[tuple[str, bool]], bound: int) -> None:
    """Each step appends the next reading of a thread, and sometimes delivers the head; a restart at the end."""
    with tempfile.TemporaryDirectory() as directory:
        spool = Spool(Path(directory), max_records=bound)
        version: dict[str, int] = {}
        delivered: list[str] = []
        for thread, deliver in steps:
            version[thread] = version.get(thread, 0) + 1
            spool.append([snap(thread, version[thread])])
            assert len(spool) <= bound
            if deliver and (head := spool.head()) is not None:
                delivered.append(head.snapshot.snapshot_id)
                spool.remove(head.seq)
        kept = ids(spool)
        spool.close()
        assert ids(Spool(Path(directory))) == kept
        seqs = [record.seq for record in Spool(Path(directory))]
        assert seqs == sorted(seqs)
        # nothing twice, and each thread's readings in version order
        arrived = delivered + kept
        assert len(arrived) == len(set(arrived))
        for thread in version:
            versions = [int(i.split("-")[1]) for i in arrived if i.startswith(f"{thread}-")]
            assert versions == sorted(versions)
        # the newest reading of each thread is never dropped while the bound can hold one per thread
        if len(version) <= bound:
            for thread, newest in version.items():
                assert f"{thread}-{newest}" in arrived


def test_frames_read_back_exactly_as_written(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    spool.append([snap("a", 1)])
    spool.close()
    frames, end = read_frames((tmp_path / LOG_NAME).read_bytes())
    assert end == (tmp_path / LOG_NAME).stat().st_size
    [(kind, seq, body)] = frames
    assert (kind, seq, ThreadContextSnapshot.model_validate_json(body)) == (b"P", 0, snap("a", 1))

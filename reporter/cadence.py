"""When to report (spec 5.1): at once on a significant change, else at least every interval of the reported level.

Pure scheduling over an injected `now`. Per thread and source it keeps the latest reading and what was last sent. A
reading is sent at once when it changes the level, the compaction count or must-finish (or is the thread's first),
except a reading whose usage predates its last compaction (`Reading.usage_stale`): nothing is sent for the thread,
not even re-sends of the reading before, until the tool reports usage again;
any other new reading waits for the due time. At the due time the latest reading is sent, or re-sent when nothing
new arrived (a re-send has a new version and `captured_at`, so the engine sees the thread alive). The interval is the
engine's `next_required_report_in_seconds` from the last answer (while the level stays the one answered), else spec
5.1's for the reported level. A thread
with no news for `idle_after`, counted from the time of its latest reading (not from when the reporter read it), is no
longer re-sent: the engine then marks it stale, which is the truth.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from core.deadlines import DeadlineIndex
from core.engine_config import REPORT_INTERVAL_SECONDS
from core.levels import SEVERITY
from core.snapshot_identity import MAX_RESEND, snapshot_version
from reporter.readings import Reading
from schemas import ContextBudgetLevel, SourceKind

DEFAULT_IDLE_AFTER = timedelta(minutes=30)

ThreadKey = tuple[str, SourceKind]


@dataclass(frozen=True)
class Outgoing:
    """A reading to send now: `resend` 0 is the reading itself; above, its n-th re-send stamped `captured_at`."""

    reading: Reading
    level: ContextBudgetLevel
    resend: int
    captured_at: datetime | None


@dataclass(frozen=True)
class _Sent:
    at: datetime
    level: ContextBudgetLevel
    compaction_count: int
    must_finish: bool
    interval: timedelta
    answered: bool = False
    """The interval is the engine's answer (it holds for later sends at the same level until the next answer)."""


@dataclass(frozen=True)
class _Thread:
    reading: Reading
    level: ContextBudgetLevel
    changed_at: datetime
    """When the reporter saw the reading change (a new reading, or must-finish set): a significant change is due."""
    active_at: datetime
    """The time of the thread's latest news: the reading's own time (a rollout line's timestamp), or when the worker
    changed must-finish. The idle window starts here, so a session that ended long ago is not revived by re-sends."""
    sent: _Sent | None = None
    sent_resend: int | None = None
    """The resend ordinal last sent of this reading; None while this reading was never sent."""
    content_sent: bool = False
    """False while the current reading's content (a new reading, or a must-finish change) is unsent."""

    def significant(self) -> bool:
        if self.sent is None:
            return True
        return (self.level, self.reading.compaction_count, self.reading.must_finish) != (
            self.sent.level,
            self.sent.compaction_count,
            self.sent.must_finish,
        )

    def due_at(self, idle_after: timedelta) -> datetime | None:
        if self.sent_resend == MAX_RESEND or self.reading.usage_stale:
            return None  # no version left, or no current occupancy to report: wait for the next reading
        if self.sent is None or (not self.content_sent and self.significant()):
            return self.changed_at
        due = self.sent.at + self.sent.interval
        if self.content_sent and due > self.active_at + idle_after:
            return None
        return due

    def next_resend(self) -> int:
        return 0 if self.sent_resend is None else self.sent_resend + 1


class Cadence:
    def __init__(
        self,
        idle_after: timedelta = DEFAULT_IDLE_AFTER,
        intervals: Mapping[ContextBudgetLevel, int] = REPORT_INTERVAL_SECONDS,
    ) -> None:
        self.idle_after = idle_after
        self.intervals = intervals
        self._threads: dict[ThreadKey, _Thread] = {}
        self._deadlines: DeadlineIndex[ThreadKey] = DeadlineIndex()
        """Each thread's due time: a round looks at the threads due, not at every thread."""

    def _put(self, key: ThreadKey, thread: _Thread) -> None:
        self._threads[key] = thread
        self._deadlines.set(key, thread.due_at(self.idle_after))

    def observe(self, reading: Reading, level: ContextBudgetLevel, now: datetime) -> None:
        """A reading arrived (or the current one changed content, e.g. must-finish): it is the one to send next."""
        key = (reading.thread_id, reading.source_kind)
        previous = self._threads.get(key)
        same_position = previous is not None and previous.reading.position == reading.position
        self._put(
            key,
            _Thread(
                reading=reading,
                level=level,
                changed_at=now,
                active_at=now if same_position else reading.observed_at,
                sent=previous.sent if previous else None,
                # A changed reading at the same position must go out under a new version: continue its resend count.
                sent_resend=previous.sent_resend if same_position and previous else None,
            ),
        )

    def due(self, now: datetime) -> list[Outgoing]:
        """What to send now, most severe level first."""
        out = []
        for key in self._deadlines.due(now):
            thread = self._threads[key]
            self._deadlines.set(key, thread.due_at(self.idle_after))  # due until `sent` says it went out
            resend = thread.next_resend()
            out.append(Outgoing(thread.reading, thread.level, resend, None if resend == 0 else now))
        return sorted(out, key=lambda o: SEVERITY[o.level], reverse=True)

    def sent(self, outgoing: Outgoing, now: datetime, next_required_seconds: int | None = None) -> None:
        """The outgoing reading was delivered; the engine may have answered the interval it requires."""
        key = (outgoing.reading.thread_id, outgoing.reading.source_kind)
        thread = self._threads[key]
        if thread.reading != outgoing.reading:
            return  # a newer reading arrived while this one was in flight; it stays due
        reading = outgoing.reading
        if next_required_seconds is not None:
            interval, answered = timedelta(seconds=next_required_seconds), True
        elif thread.sent is not None and thread.sent.answered and thread.sent.level is outgoing.level:
            # A spooled send is answered later: until then the engine's last word holds (a project's strict policy
            # may ask for more than spec 5.1's interval of the level).
            interval, answered = thread.sent.interval, True
        else:
            interval, answered = timedelta(seconds=self.intervals[outgoing.level]), False
        mark = _Sent(now, outgoing.level, reading.compaction_count, reading.must_finish, interval, answered)
        self._put(key, replace(thread, sent=mark, sent_resend=outgoing.resend, content_sent=True))

    def answered(self, key: ThreadKey, version: int, next_required_seconds: int) -> None:
        """The engine answered a delivered snapshot later than it was handed over (a spooled delivery): its interval
        applies when that snapshot is still the thread's last one sent; an answer to an older one says nothing now."""
        thread = self._threads.get(key)
        if thread is None or thread.sent is None or thread.sent_resend is None:
            return
        if snapshot_version(thread.reading.position, thread.sent_resend) != version:
            return
        interval = timedelta(seconds=next_required_seconds)
        self._put(key, replace(thread, sent=replace(thread.sent, interval=interval, answered=True)))

    def unsent(self, now: datetime) -> list[Outgoing]:
        """Every reading whose content was not sent yet, due or not (when the input ends, nothing more will come)."""
        return [
            Outgoing(t.reading, t.level, t.next_resend(), None if t.next_resend() == 0 else now)
            for t in self._threads.values()
            if not t.content_sent and t.sent_resend != MAX_RESEND and not t.reading.usage_stale
        ]

    def next_due(self) -> datetime | None:
        """The earliest due time of any thread (for the loop's sleep); None when nothing is due ever."""
        return self._deadlines.earliest()

    def latest(self, thread_id: str, source_kind: SourceKind) -> Reading | None:
        thread = self._threads.get((thread_id, source_kind))
        return thread.reading if thread else None

"""Spec 4.2 work facts of a thread, from its working directory (git) and the commands it ran.

- `uncommitted_patch`: `git status --porcelain` lists changes (the files go to the checklist).
- `unrecorded_test_results`: a test command ran after the last commit (its conclusion is not in history yet); the
  detail is that conclusion (`<command>: passed|failed|running`), which the checklist shows.
- `unrecorded_decisions`: changed, uncommitted files under the configured decision paths.
- `uninterruptible_hardware_step`: a command matching the hardware patterns started and has not finished.
- `awaiting_cross_node_reply`: a running command matching the waiting patterns.

`WorkFactTracker.evaluate` returns only the facts that changed since the last evaluation, as `work_fact_changed`
events whose ids derive from the thread, the fact, its state and the evaluation time. `WorkFactTracker.due` says when
to look again: at once after a command started or finished or a file edit (what changes the facts), else once
`refresh` passed: a busy thread writes a line every few seconds, and a look at its work tree costs a git process,
far more than reading the line. Looks are kept per work tree, shared by its threads and across rounds: git is asked
again only when a command finished or a file was edited in that tree (what changes it; a command's start cannot
have yet), or the look is older than `refresh`. A tree changed since its last look is looked at again once that look
is `settle` old: the threads of a busy tree finish commands and edit files every few seconds between them, and a look
after each cost a git process per line. A look is one `git status`; the last commit's time is asked only when the
commit it names is new.
"""

from __future__ import annotations

import fnmatch
import hashlib
import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from schemas import WorkFact
from schemas.base import MAX_LIST_ITEMS
from schemas.session_events import WorkFactChanged

DEFAULT_TEST_PATTERNS = (
    r"\bpytest\b",
    r"\bpython3?\s+-m\s+(pytest|unittest)\b",
    r"\b(npm|pnpm|yarn)\s+(run\s+)?test\b",
    r"\bcargo\s+(test|nextest)\b",
    r"\bgo\s+test\b",
    r"\b(mvn|mvnw|gradle|gradlew)\b.*\b(test|check|verify)\b",
    r"\bctest\b",
)
DEFAULT_DECISION_PATHS = ("docs/adr/*", "docs/decisions/*", "*DECISIONS*.md", "*ADR*.md")
DEFAULT_HARDWARE_PATTERNS = (r"\b(openocd|esptool(\.py)?|avrdude|dfu-util|st-flash|nrfjprog|fastboot\s+flash)\b",)
DEFAULT_WAITING_PATTERNS: tuple[str, ...] = ()
GIT_TIMEOUT_SECONDS = 5.0
DEFAULT_REFRESH = timedelta(seconds=60)
"""How long a thread's work-tree view may age while its lines show no command and no edit (a change made outside
the agent, e.g. a commit in another terminal, is seen within it)."""
DEFAULT_SETTLE = timedelta(seconds=2)
"""A work tree is looked at again at most this often, however often its threads change it: their facts arrive up to
this much later."""


@dataclass(frozen=True)
class FactPatterns:
    test: Sequence[str] = DEFAULT_TEST_PATTERNS
    decision_paths: Sequence[str] = DEFAULT_DECISION_PATHS
    hardware: Sequence[str] = DEFAULT_HARDWARE_PATTERNS
    waiting: Sequence[str] = DEFAULT_WAITING_PATTERNS

    def matches(self, patterns: Sequence[str], command: str) -> bool:
        return any(re.search(p, command) for p in patterns)


@dataclass(frozen=True)
class GitView:
    changed_files: tuple[str, ...]
    last_commit_at: datetime | None
    head: str | None = None
    """The commit HEAD names (None before the first)."""


def _git(cwd: Path, *args: str) -> str | None:
    """`--no-optional-locks`: a background look neither writes the refreshed index (less work) nor holds its lock
    while the agent's own git commands run (git's advice for background status)."""
    try:
        done = subprocess.run(
            ["git", "--no-optional-locks", "-C", str(cwd), *args],
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_SECONDS,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def git_view(cwd: Path, previous: GitView | None = None) -> GitView | None:
    """The working tree's changed files and the last commit's time; None when `cwd` is no git work tree. The
    `previous` look at the same tree spares the second git process while HEAD names the same commit."""
    status = _git(cwd, "status", "--porcelain=v2", "-z", "--branch", "--untracked-files=all")
    if status is None:
        return None
    files, head = _changed_files(status)
    if head is None:  # no commit yet
        return GitView(files, None)
    if previous is not None and previous.head == head:
        return GitView(files, previous.last_commit_at, head)
    log = _git(cwd, "log", "-1", "--format=%cI", head)
    return GitView(files, datetime.fromisoformat(log.strip()) if log and log.strip() else None, head)


def _changed_files(status: str) -> tuple[tuple[str, ...], str | None]:
    """The paths of `git status --porcelain=v2 -z --branch` and the commit HEAD names (None before the first)."""
    files, head = [], None
    entries = iter(status.split("\0"))
    for entry in entries:
        kind = entry[:1]
        if entry.startswith("# branch.oid "):
            oid = entry.removeprefix("# branch.oid ")
            head = None if oid == "(initial)" else oid
        elif kind == "1":
            files.append(entry.split(" ", 8)[8])
        elif kind == "2":  # a rename or copy: the new path, then the original as the next entry
            files.append(entry.split(" ", 9)[9])
            next(entries, None)
        elif kind == "u":
            files.append(entry.split(" ", 10)[10])
        elif kind == "?":
            files.append(entry[2:])
    return tuple(sorted(files)), head


@dataclass
class _Look:
    view: GitView | None
    at: datetime
    stale: bool = False
    """A command finished or a file was edited in the tree since the look."""


@dataclass
class _Command:
    command: str
    at: datetime
    finished: bool = False
    failed: bool | None = None


@dataclass
class _Thread:
    cwd: Path
    commands: dict[str, _Command] = field(default_factory=dict)
    facts: dict[WorkFact, tuple[bool, str, tuple[str, ...]]] = field(default_factory=dict)
    evaluated_at: datetime | None = None
    commands_changed: bool = True
    """A command started or finished, or a file was edited, since the last evaluation."""


@dataclass(frozen=True)
class Checklist:
    """What the wrap-up checklist (spec 8.3) needs from the worker."""

    files: tuple[str, ...] = ()
    last_key_command: str | None = None
    last_test_conclusion: str | None = None


COMMANDS_KEPT = 64


class WorkFactTracker:
    def __init__(
        self,
        patterns: FactPatterns | None = None,
        refresh: timedelta = DEFAULT_REFRESH,
        settle: timedelta = DEFAULT_SETTLE,
    ) -> None:
        self.patterns = patterns or FactPatterns()
        self.refresh = refresh
        self.settle = settle
        self._threads: dict[str, _Thread] = {}
        self._looks: dict[Path, _Look] = {}
        """The latest look at each work tree."""

    def observe_cwd(self, thread_id: str, cwd: str) -> None:
        thread = self._threads.get(thread_id)
        if thread is None or str(thread.cwd) != cwd:
            self._threads[thread_id] = _Thread(Path(cwd))

    def observe_command(self, thread_id: str, call_id: str, command: str, at: datetime) -> None:
        if (thread := self._threads.get(thread_id)) is None:
            return
        thread.commands[call_id] = _Command(command, at)
        thread.commands_changed = True
        while len(thread.commands) > COMMANDS_KEPT:
            thread.commands.pop(next(iter(thread.commands)))

    def observe_edit(self, thread_id: str) -> None:
        """The agent edited files (an edit tool, not a shell command): the work tree is worth a look."""
        if (thread := self._threads.get(thread_id)) is not None:
            thread.commands_changed = True
            self._tree_changed(thread.cwd)

    def observe_result(self, thread_id: str, call_id: str, failed: bool) -> None:
        thread = self._threads.get(thread_id)
        if thread is not None and (command := thread.commands.get(call_id)) is not None:
            command.finished, command.failed = True, failed
            thread.commands_changed = True
            self._tree_changed(thread.cwd)

    def _tree_changed(self, cwd: Path) -> None:
        if (look := self._looks.get(cwd)) is not None:
            look.stale = True

    def threads(self) -> list[str]:
        return list(self._threads)

    def cwd(self, thread_id: str) -> Path | None:
        thread = self._threads.get(thread_id)
        return thread.cwd if thread else None

    def _last_test(self, thread: _Thread) -> _Command | None:
        tests = [c for c in thread.commands.values() if self.patterns.matches(self.patterns.test, c.command)]
        return max(tests, key=lambda c: c.at, default=None)

    def current(
        self, thread_id: str, now: datetime | None = None
    ) -> dict[WorkFact, tuple[bool, str, tuple[str, ...]]] | None:
        """Each fact's (active, detail, files) now; None when the thread's directory is no git work tree. With
        `now`, threads in one work tree share its latest look while it holds (see the module's docstring)."""
        thread = self._threads.get(thread_id)
        view = self._view(thread.cwd, now) if thread else None
        if thread is None or view is None:
            return None
        test = self._last_test(thread)
        untested = test is not None and (view.last_commit_at is None or test.at > view.last_commit_at)
        decisions = tuple(
            f for f in view.changed_files if any(fnmatch.fnmatch(f, p) for p in self.patterns.decision_paths)
        )
        running = [c for c in thread.commands.values() if not c.finished]
        hardware = [c.command for c in running if self.patterns.matches(self.patterns.hardware, c.command)]
        waiting = [c.command for c in running if self.patterns.matches(self.patterns.waiting, c.command)]
        return {
            WorkFact.UNCOMMITTED_PATCH: (bool(view.changed_files), "", view.changed_files),
            WorkFact.UNRECORDED_TEST_RESULTS: (untested, _conclusion(test) if untested and test else "", ()),
            WorkFact.UNRECORDED_DECISIONS: (bool(decisions), "", decisions),
            WorkFact.UNINTERRUPTIBLE_HARDWARE_STEP: (bool(hardware), "; ".join(hardware), ()),
            WorkFact.AWAITING_CROSS_NODE_REPLY: (bool(waiting), "; ".join(waiting), ()),
        }

    def _view(self, cwd: Path, now: datetime | None) -> GitView | None:
        look = self._looks.get(cwd)
        if now is None:
            return git_view(cwd, look.view if look else None)
        if look is None or now - look.at >= (self.settle if look.stale else self.refresh):
            look = self._looks[cwd] = _Look(git_view(cwd, look.view if look else None), now)
        return look.view

    def evaluate(self, thread_id: str, now: datetime, project_id: str | None = None) -> list[WorkFactChanged]:
        """The facts that changed since the last evaluation (the first evaluation reports the active ones)."""
        thread = self._threads.get(thread_id)
        if thread is None:
            return []
        thread.evaluated_at, thread.commands_changed = now, False
        facts = self.current(thread_id, now)
        if facts is None:
            return []
        events = []
        for fact, value in facts.items():
            previous = thread.facts.get(fact, (False, "", ()))
            if value == previous:
                continue
            active, detail, files = value
            digest = hashlib.sha256(f"{thread_id}|{fact}|{value}|{now.isoformat()}".encode()).hexdigest()[:32]
            events.append(
                WorkFactChanged(
                    thread_id=thread_id,
                    event_id=f"wf-{digest}",
                    occurred_at=now,
                    project_id=project_id,
                    fact=fact,
                    active=active,
                    detail=detail[:200],
                    files=list(files)[:MAX_LIST_ITEMS],
                )
            )
            thread.facts[fact] = value
        return events

    def due(self, thread_id: str, now: datetime) -> bool:
        """Whether to look at the thread's work tree now: a command started or finished, a file was edited, or its
        last look is older than `refresh`; and the tree is not settling (changed since a look younger than `settle`,
        which would be the view: the caller asks again in a later round)."""
        thread = self._threads.get(thread_id)
        if thread is None:
            return True
        if thread.evaluated_at is not None and not thread.commands_changed and now - thread.evaluated_at < self.refresh:
            return False
        look = self._looks.get(thread.cwd)
        return look is None or not look.stale or now - look.at >= self.settle

    def must_finish(self, thread_id: str) -> bool:
        thread = self._threads.get(thread_id)
        return thread is not None and any(active for active, _, _ in thread.facts.values())

    def checklist(self, thread_id: str) -> Checklist:
        thread = self._threads.get(thread_id)
        if thread is None:
            return Checklist()
        files = thread.facts.get(WorkFact.UNCOMMITTED_PATCH, (False, "", ()))[2]
        last = max(thread.commands.values(), key=lambda c: c.at, default=None)
        test = self._last_test(thread)
        return Checklist(files, last.command if last else None, _conclusion(test) if test else None)


def _conclusion(test: _Command) -> str:
    """The engine's checklist shows this detail as the last test conclusion (spec 8.3)."""
    state = "running" if not test.finished else "failed" if test.failed else "passed"
    return f"{test.command}: {state}"

"""The spec 8.3 package from what the worker knows plus the agent's part (spec 3.3 record, no field renamed).

Where each 8.3 item goes in the 3.3 record: files -> `critical_files`; completed patches (commits since the thread
began, `commit <sha> <subject>`) and the pending one (the uncommitted diff saved as a `.diff` file the next thread
can `git apply`, by its bare path) -> `critical_artifacts`, beside the evidence links; the last key command with its
result -> `critical_commands`; the last test conclusion -> `critical_tests`; open questions and decision links ->
their own fields; the summary and the suggested next actions -> `summary_text`. A package the agent could not be
asked for says so at the head of its summary, which then quotes the transcript's latest assistant messages.

`gather` reads git; `assemble` and `promote` are pure.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from core.handoff import FACTS_ONLY_MARK, missing_for_ready
from reporter.agent_handoff import AgentHandoff
from reporter.git_facts import GIT_TIMEOUT_SECONDS, Checklist, git_view
from schemas import HandoffPackage, PackageStatus
from schemas.base import MAX_LIST_ITEMS, MAX_LONG_TEXT_LENGTH, MAX_SHORT_TEXT_LENGTH

COMMIT_PREFIX = "completed patch: commit "
COMMITS_KEPT = 50


@dataclass(frozen=True)
class WorkerFacts:
    """What the worker itself knows of a thread's work for the 8.3 checklist."""

    files: tuple[str, ...] = ()
    commits: tuple[str, ...] = ()
    """`<sha> <subject>` of the commits since the thread began, oldest first."""
    pending_patch: Path | None = None
    last_key_command: str | None = None
    last_test_conclusion: str | None = None
    evidence_links: tuple[str, ...] = field(default_factory=tuple)


def _git(cwd: Path, *args: str, env: dict[str, str] | None = None) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(cwd), *args],
            env={**os.environ, **env} if env else None,
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_SECONDS,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def save_pending_patch(cwd: Path, directory: Path, thread_id: str) -> Path | None:
    """The uncommitted work (tracked changes and new files) as one diff file under `directory`; None when clean.

    New files are diffed through a temporary index and object store, so the user's index and objects are never
    touched."""
    if not (view := git_view(cwd)) or not view.changed_files:
        return None
    directory.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{_safe(thread_id)}-", dir=directory) as scratch:
        patch = _diff_with_temporary_index(cwd, Path(scratch))
    if not patch:
        return None
    path = directory / f"{_safe(thread_id)}-{hashlib.sha256(patch.encode()).hexdigest()[:12]}.diff"
    path.write_text(patch, encoding="utf-8")
    return path


def _diff_with_temporary_index(cwd: Path, scratch: Path) -> str | None:
    """The diff of the work tree against HEAD through an index and an object store of our own under `scratch`: the
    blobs `git add` writes go there (the repository's objects are only read, as an alternate), so nothing lands in the
    user's repository, not even unreachable objects."""
    objects = _git(cwd, "rev-parse", "--path-format=absolute", "--git-path", "objects")
    if objects is None:
        return None
    (scratch / "objects").mkdir()  # git refuses an object directory that does not exist
    env = {
        "GIT_INDEX_FILE": str(scratch / "index"),
        "GIT_OBJECT_DIRECTORY": str(scratch / "objects"),
        "GIT_ALTERNATE_OBJECT_DIRECTORIES": objects.strip(),
    }
    head = _git(cwd, "rev-parse", "--verify", "-q", "HEAD") is not None
    if _git(cwd, "read-tree", "HEAD" if head else "--empty", env=env) is None:
        return None
    if _git(cwd, "add", "-A", env=env) is None:
        return None
    return _git(cwd, "diff", "--cached", "--binary", *(["HEAD"] if head else []), env=env)


def commits_since(cwd: Path, since: datetime | None) -> tuple[str, ...]:
    """`<short sha> <subject>` of the commits made since `since` (None: none known), oldest first."""
    if since is None:
        return ()
    out = _git(cwd, "log", f"--since={since.isoformat()}", f"-{COMMITS_KEPT}", "--reverse", "--format=%h %s")
    return tuple(line for line in (out or "").splitlines() if line.strip())


def gather(
    cwd: Path | None,
    thread_began: datetime | None,
    patch_dir: Path,
    thread_id: str,
    checklist: Checklist | None = None,
    evidence: Sequence[str] = (),
) -> WorkerFacts:
    """The worker's facts now: git (when `cwd` is a work tree) and the commands the reporter saw (`checklist`)."""
    view = git_view(cwd) if cwd is not None else None
    checklist = checklist or Checklist()
    return WorkerFacts(
        files=view.changed_files if view else checklist.files,
        commits=commits_since(cwd, thread_began) if cwd is not None else (),
        pending_patch=save_pending_patch(cwd, patch_dir, thread_id) if view else None,
        last_key_command=checklist.last_key_command,
        last_test_conclusion=checklist.last_test_conclusion,
        evidence_links=tuple(evidence),
    )


def assemble(
    *,
    package_id: str,
    project_id: str,
    task_id: str | None,
    thread_id: str,
    facts: WorkerFacts,
    agent: AgentHandoff | None,
    latest_messages: Sequence[str],
    now: datetime,
) -> HandoffPackage:
    """The draft package: the agent's part when it answered, else the transcript's latest messages, marked."""
    artifacts = [
        *(COMMIT_PREFIX + line for line in facts.commits),
        *([str(facts.pending_patch)] if facts.pending_patch else []),
        *facts.evidence_links,
    ]
    return HandoffPackage(
        handoff_package_id=package_id,
        project_id=project_id,
        task_id=task_id,
        from_thread_id=thread_id,
        package_status=PackageStatus.DRAFT,
        summary_text=_summary(agent, latest_messages, facts),
        open_questions=_items(agent.open_questions if agent else ()),
        critical_files=_items(facts.files),
        critical_commands=_items([facts.last_key_command] if facts.last_key_command else ()),
        critical_tests=_items([facts.last_test_conclusion] if facts.last_test_conclusion else ()),
        critical_artifacts=_items(artifacts),
        decision_links=_items(agent.decision_links if agent else ()),
        created_at=now,
    )


def promote(package: HandoffPackage, now: datetime) -> HandoffPackage | None:
    """The ready version once the package meets the engine's readiness rule; None while it does not."""
    if missing_for_ready(package):
        return None
    return package.model_copy(update={"package_status": PackageStatus.READY, "ready_at": max(now, package.created_at)})


def _summary(agent: AgentHandoff | None, latest_messages: Sequence[str], facts: WorkerFacts) -> str:
    if agent is not None:
        parts = [agent.summary.strip()]
        if agent.next_actions:
            parts.append("Next actions:\n" + "\n".join(f"- {action}" for action in agent.next_actions))
    else:
        quoted = [message.strip() for message in latest_messages if message.strip()]
        body = [*quoted, *_facts_lines(facts)]
        parts = [FACTS_ONLY_MARK, *body] if body else []  # nothing known: no summary, so the package stays a draft
    if facts.pending_patch is not None:
        parts.append(f"Apply the pending patch first: git apply {facts.pending_patch}")
    return "\n\n".join(parts)[:MAX_LONG_TEXT_LENGTH]


def _facts_lines(facts: WorkerFacts) -> list[str]:
    lines = [f"Uncommitted changes in: {', '.join(facts.files)}"] if facts.files else []
    if facts.commits:
        lines.append(f"Committed since the thread began: {len(facts.commits)} (last: {facts.commits[-1]})")
    if facts.last_test_conclusion:
        lines.append(f"Last test: {facts.last_test_conclusion}")
    return lines


def _items(values: Sequence[str]) -> list[str]:
    return [value[:MAX_SHORT_TEXT_LENGTH] for value in values if value][:MAX_LIST_ITEMS]


def _safe(name: str) -> str:
    return "".join(char if char.isalnum() or char in "-_." else "_" for char in name)

"""A hook's answer, with the API asked and the hooks' memory kept: the I/O around reporter.hooks.actions.

Fail open: when the API cannot be asked (`ApiUnavailable`), the answer is nothing at all (the tool goes on as if no
hook were installed) and the reason goes to `notes`, which the command prints on stderr.

SessionStart resumes from a package:
- a relay thread: a new session (source `startup`) started with `CTXBUDGET_RESUME_PACKAGE=<package id>` in its
  environment: the package's resume prompt, and the package consumed into this session's thread;
- after a compaction (source `compact`): the thread's current package, while it is ready. It is not consumed: Claude
  Code keeps the session id across a compaction, so the "next thread" is the same thread, which the API refuses as
  `to_thread_id`; the compaction itself used the package up for the engine (its cycle ended).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reporter.budget_api import ApiUnavailable, BudgetApi
from reporter.hooks import memory as hook_memory
from reporter.hooks.actions import (
    CONTEXT_EVENTS,
    SESSION_START,
    STOP,
    additional_context,
    decide,
    handoff_command,
    package_to_check,
    remember,
    thread_duty,
)
from reporter.hooks.payload import HookInput
from reporter.relay.resume import resume_prompt
from schemas import HandoffPackage, PackageStatus

COMPACT_SOURCE = "compact"
STARTUP_SOURCE = "startup"
ACTING_EVENTS = CONTEXT_EVENTS | {STOP}
ANSWERED_EVENTS = ACTING_EVENTS | {SESSION_START}
"""The events a hook may answer; the others (PreCompact, PostCompact) are only reported."""


@dataclass
class Acted:
    output: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Program:
    """How the agent runs ctxbudget: the program's absolute path, and the API's URL when its environment lacks it."""

    path: str
    api_url: str | None = None


def act(
    hook: HookInput, api: BudgetApi, memory_path: Path, resume_package_id: str | None, program: Program, patch_dir: Path
) -> Acted:
    """`patch_dir`: where this worker saves its pending patches, the only ones a resume prompt offers to apply."""
    acted = Acted()
    if hook.subagent:
        return acted
    try:
        if hook.event_name == SESSION_START:
            text = _resume(hook, api, resume_package_id, patch_dir, acted.notes)
            acted.output = additional_context(SESSION_START, text) if text else None
        elif hook.event_name in ACTING_EVENTS:
            acted.output = _duty_answer(hook, api, memory_path, program)
    except ApiUnavailable as error:
        acted.notes.append(f"the API could not be asked, the hook lets the tool go on: {error}")
    return acted


def _duty_answer(hook: HookInput, api: BudgetApi, memory_path: Path, program: Program) -> dict[str, Any] | None:
    detail = api.thread_detail(hook.session_id)
    if detail is None:
        return None  # a thread the API does not know (not reported yet, or not this worker's): nothing is owed
    package_id = package_to_check(detail)
    duty = thread_duty(detail, api.package(package_id) if package_id else None)
    with hook_memory.updating(memory_path) as (memory, save):
        answer = decide(hook, duty, memory, handoff_command(program.path, hook.session_id, program.api_url))
        if remember(memory, duty.thread_id, answer):
            save()
    return answer.output


def _resume(
    hook: HookInput, api: BudgetApi, resume_package_id: str | None, patch_dir: Path, notes: list[str]
) -> str | None:
    if resume_package_id and hook.source == STARTUP_SOURCE:
        package = api.package(resume_package_id)
        if package is None:
            notes.append(f"handoff package {resume_package_id} not found: nothing to resume from")
            return None
        text = resume_prompt(package, patch_dir)
        if not _consumed_into(package, hook.session_id):
            try:
                api.consume(package.handoff_package_id, hook.session_id)
            except ApiUnavailable as error:  # the prompt is still worth giving: the work goes on either way
                notes.append(f"handoff package {package.handoff_package_id} not marked consumed: {error}")
        return text
    if hook.source == COMPACT_SOURCE:
        package = api.thread_package(hook.session_id)
        if package is not None and package.package_status is PackageStatus.READY:
            return resume_prompt(package, patch_dir)
    return None


def _consumed_into(package: HandoffPackage, thread_id: str) -> bool:
    return package.package_status is PackageStatus.CONSUMED and package.to_thread_id == thread_id

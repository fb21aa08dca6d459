"""The resume prompt: what the next thread is told first, built from a handoff package (spec 3.3, 8.3).

One pure function, so `ctxbudget handoff resume`, the SessionStart hook and a Codex `thread/start` (the relay) give
the next thread the same text. Every part of the package the next thread can act on is in it: the summary, the
patches to apply (the package links the saved diff among its artifacts), the files, commands and tests that matter,
the open questions, and the agent's next actions (spec 3.3 has no field for them: the worker writes them into the
summary when it assembles the package). Empty parts are left out rather than shown as "none".

A package's links are whatever its writer put there, so only a saved diff this worker wrote itself, a file inside its
patch directory (the worker state dir's `patches/`, reporter.worker_state), is offered to `git apply`; any other
`.diff` or `.patch` (`../../etc/passwd.diff`, another machine's path) is listed as evidence only.
"""

from __future__ import annotations

from pathlib import Path

from schemas import HandoffPackage

PATCH_SUFFIXES = (".patch", ".diff")
"""An artifact with one of these endings is a saved diff the next thread applies (`git apply`)."""


def patches(package: HandoffPackage, patch_dir: Path) -> list[str]:
    """The package's saved diffs to apply: files inside `patch_dir` (symbolic links resolved)."""
    return [link for link in package.critical_artifacts if _saved_diff(link, patch_dir.resolve())]


def _saved_diff(link: str, patch_dir: Path) -> bool:
    if not link.lower().endswith(PATCH_SUFFIXES) or not Path(link).is_absolute():
        return False
    try:
        path = Path(link).resolve()
    except (OSError, RuntimeError):  # a link loop, a name the OS refuses
        return False
    return path.is_relative_to(patch_dir) and path.is_file()


def resume_prompt(package: HandoffPackage, patch_dir: Path) -> str:
    """The text the next thread starts from; `patch_dir` is where this worker saves its pending patches."""
    saved_diffs = patches(package, patch_dir)
    evidence = [link for link in package.critical_artifacts if link not in saved_diffs]
    lines = [
        f"You are continuing the work of thread {package.from_thread_id} (handoff package "
        f"{package.handoff_package_id}, project {package.project_id}"
        + (f", task {package.task_id}" if package.task_id else "")
        + "). It was handed over before its context was compacted; start from this, not from scratch.",
        "",
        "## Summary",
        package.summary_text.strip() or "(the package carries no summary: read the files and commands below)",
    ]
    sections = [
        ("Patches to apply first (`git apply <file>`; they hold the uncommitted work)", saved_diffs),
        ("Files that matter", package.critical_files),
        ("Commands (the last key ones, with their results)", package.critical_commands),
        ("Tests (the last conclusions)", package.critical_tests),
        ("Open questions", package.open_questions),
        ("Decisions and links", package.decision_links),
        ("Evidence (logs, artifacts)", evidence),
    ]
    for title, items in sections:
        if items:
            lines += ["", f"## {title}", *(f"- {item}" for item in items)]
    return "\n".join(lines) + "\n"

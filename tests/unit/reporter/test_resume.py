"""The resume prompt carries everything in the package the next thread can act on, and nothing made up."""

from __future__ import annotations

from reporter.resume import patches, resume_prompt
from tests.unit.reporter.budget_fake import sample_package


def test_every_part_of_the_package_is_in_the_prompt() -> None:
    package = sample_package("thread-old", summary_text="Parser rewritten.\n\nNext actions:\n- Fix the BOM case first")
    prompt = resume_prompt(package)
    for text in (
        package.summary_text,
        *package.open_questions,
        *package.critical_files,
        *package.critical_commands,
        *package.critical_tests,
        *package.critical_artifacts,
        *package.decision_links,
        "Fix the BOM case first",
        "thread-old",
        package.handoff_package_id,
    ):
        assert text in prompt


def test_saved_diffs_are_patches_to_apply_and_other_artifacts_evidence() -> None:
    package = sample_package("thread-old", critical_artifacts=["a/work.patch", "b/run.log", "c/x.DIFF"])
    assert patches(package) == ["a/work.patch", "c/x.DIFF"]
    prompt = resume_prompt(package)
    apply_section = prompt.split("## Patches to apply first")[1].split("##")[0]
    assert "a/work.patch" in apply_section
    assert "c/x.DIFF" in apply_section
    assert "b/run.log" not in apply_section
    assert "b/run.log" in prompt.split("## Evidence")[1]


def test_empty_parts_are_left_out() -> None:
    package = sample_package(
        "thread-old",
        open_questions=[],
        critical_files=[],
        critical_commands=[],
        critical_tests=[],
        critical_artifacts=[],
        decision_links=[],
    )
    prompt = resume_prompt(package)
    assert prompt.count("## ") == 1  # the summary only
    assert "Patches" not in prompt

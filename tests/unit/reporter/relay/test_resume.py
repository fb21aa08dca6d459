"""The resume prompt carries everything in the package the next thread can act on, and nothing made up."""

from __future__ import annotations

from pathlib import Path

import pytest

from reporter.relay.resume import patches, resume_prompt
from tests.unit.reporter.budget_fake import sample_package

NO_PATCHES = Path("/nonexistent/patches")


def test_every_part_of_the_package_is_in_the_prompt() -> None:
    package = sample_package("thread-old", summary_text="Parser rewritten.\n\nNext actions:\n- Fix the BOM case first")
    prompt = resume_prompt(package, NO_PATCHES)
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


def test_only_saved_diffs_in_the_patch_dir_are_offered_to_apply_the_others_are_evidence(tmp_path: Path) -> None:
    patch_dir = tmp_path / "state" / "patches"
    patch_dir.mkdir(parents=True)
    saved, upper = patch_dir / "t-1.diff", patch_dir / "t-2.PATCH"
    saved.write_text("diff")
    upper.write_text("diff")
    outside = tmp_path / "elsewhere.diff"
    outside.write_text("diff")
    (patch_dir / "link.diff").symlink_to(outside)
    hostile = [
        f"{patch_dir}/../../../../etc/passwd.diff",
        str(outside),
        str(patch_dir / "link.diff"),
        str(patch_dir / "missing.diff"),
        "a/work.patch",
        str(patch_dir / "run.log"),
    ]
    package = sample_package("thread-old", critical_artifacts=[str(saved), str(upper), *hostile])
    assert patches(package, patch_dir) == [str(saved), str(upper)]
    prompt = resume_prompt(package, patch_dir)
    apply_section = prompt.split("## Patches to apply first")[1].split("##")[0]
    evidence = prompt.split("## Evidence")[1]
    assert str(saved) in apply_section
    assert str(upper) in apply_section
    for link in hostile:
        assert link not in apply_section
        assert link in evidence


@pytest.mark.parametrize("link", ["../../../../etc/passwd.diff", "/etc/x.patch"])
def test_a_package_naming_no_saved_diff_offers_nothing_to_apply(link: str) -> None:
    prompt = resume_prompt(sample_package("thread-old", critical_artifacts=[link]), NO_PATCHES)
    assert "git apply" not in prompt
    assert link in prompt.split("## Evidence")[1]


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
    prompt = resume_prompt(package, NO_PATCHES)
    assert prompt.count("## ") == 1  # the summary only
    assert "Patches" not in prompt

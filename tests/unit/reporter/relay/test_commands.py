"""`ctxbudget handoff resume`: the next thread's prompt, and the package consumed by it, through the API."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from typer.testing import CliRunner, Result

from ctxbudget.cli import app
from reporter.relay.resume import resume_prompt
from reporter.worker_state import PATCHES, state_dir
from schemas import PackageStatus
from tests.unit.reporter.budget_fake import FakeBudgetApi, sample_package


@pytest.fixture
def api() -> Iterator[FakeBudgetApi]:
    yield from FakeBudgetApi().serve()


def _resume(api: FakeBudgetApi, *args: str) -> Result:
    return CliRunner().invoke(app, ["handoff", "resume", "--api-url", api.url, "--token", "t", *args])


def test_resume_by_package_prints_the_prompt_and_consumes_it(api: FakeBudgetApi) -> None:
    api.thread("thread-old")
    package = sample_package("thread-old")
    api.post_package(package)
    result = _resume(api, "--package", package.handoff_package_id, "--to-thread", "thread-new")
    assert result.exit_code == 0, result.output
    consumed = api.packages[package.handoff_package_id]
    assert (consumed.package_status, consumed.to_thread_id) == (PackageStatus.CONSUMED, "thread-new")
    assert result.stdout == resume_prompt(consumed, state_dir() / PATCHES)
    assert "consumed by thread-new" in result.stderr
    again = _resume(api, "--package", package.handoff_package_id, "--to-thread", "thread-new")
    assert (again.exit_code, again.stdout) == (0, result.stdout)  # the same answer, not consumed twice
    assert sum(method == "POST" for method, _ in api.requests) == 1


def test_resume_from_the_thread_takes_its_current_package(api: FakeBudgetApi) -> None:
    api.thread("thread-old")
    api.post_package(sample_package("thread-old"))
    result = _resume(api, "--from-thread", "thread-old", "--to-thread", "thread-new")
    assert result.exit_code == 0, result.output
    assert "Parser rewritten" in result.stdout


def test_a_package_taken_by_another_thread_or_not_ready_is_refused(api: FakeBudgetApi) -> None:
    api.thread("thread-old")
    package = sample_package("thread-old")
    api.post_package(package)
    assert _resume(api, "--package", package.handoff_package_id, "--to-thread", "thread-a").exit_code == 0
    taken = _resume(api, "--package", package.handoff_package_id, "--to-thread", "thread-b")
    assert (taken.exit_code, taken.stdout) == (1, "")
    assert "consumed by thread-a" in taken.stderr
    api.post_package(sample_package("thread-draft", PackageStatus.DRAFT, handoff_package_id="hp-draft"))
    draft = _resume(api, "--package", "hp-draft", "--to-thread", "thread-b")
    assert draft.exit_code == 1
    assert "draft" in draft.stderr


def test_unknown_package_or_api_down_fails_with_the_reason(api: FakeBudgetApi) -> None:
    missing = _resume(api, "--package", "hp-nope", "--to-thread", "thread-b")
    assert (missing.exit_code, "no handoff package hp-nope" in missing.stderr) == (1, True)
    api.down = True
    down = _resume(api, "--from-thread", "thread-old", "--to-thread", "thread-b")
    assert down.exit_code == 1
    assert "503" in down.stderr


def test_exactly_one_of_package_or_from_thread(api: FakeBudgetApi) -> None:
    assert _resume(api, "--to-thread", "thread-b").exit_code == 2
    assert _resume(api, "--package", "p", "--from-thread", "t", "--to-thread", "thread-b").exit_code == 2

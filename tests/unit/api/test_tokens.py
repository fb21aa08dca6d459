"""Bearer tokens: what verifies, and every way a token is refused."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import jwt
import pytest
from hypothesis import given
from hypothesis import strategies as st

from api.settings import ApiSettings, token_secret
from api.tokens import ISSUER, InvalidToken, Principal, Role, issue_token, load_or_create_secret, verify_token
from core.settings import Settings

SECRET = b"s" * 32
HOUR = timedelta(hours=1)

ids = st.text(st.characters(blacklist_categories=("Z", "C"), blacklist_characters="/"), min_size=1, max_size=128)


@given(role=st.sampled_from(Role), subject=ids, projects=st.lists(ids, min_size=1, max_size=5))
def test_an_issued_token_verifies_to_its_claims(role: Role, subject: str, projects: list[str]) -> None:
    principal = verify_token(SECRET, issue_token(SECRET, role, subject, projects, ttl=HOUR))
    assert principal == Principal(subject, role, frozenset(projects))


def test_a_token_signed_with_another_secret_is_refused() -> None:
    token = issue_token(b"x" * 32, Role.OPERATOR, "ops", ttl=HOUR)
    with pytest.raises(InvalidToken):
        verify_token(SECRET, token)


def test_an_unsigned_alg_none_token_is_refused() -> None:
    now = int(datetime.now(UTC).timestamp())
    claims = {"iss": ISSUER, "sub": "ops", "role": "operator", "projects": [], "iat": now, "exp": now + 60}
    with pytest.raises(InvalidToken):
        verify_token(SECRET, jwt.encode(claims, None, algorithm="none"))


def test_an_expired_token_is_refused() -> None:
    token = issue_token(SECRET, Role.USER, "u", ["p"], ttl=HOUR, now=datetime.now(UTC) - 2 * HOUR)
    with pytest.raises(InvalidToken):
        verify_token(SECRET, token)


def test_a_token_verified_before_is_refused_once_it_expires() -> None:
    issued = datetime.now(UTC)
    token = issue_token(SECRET, Role.WORKER, "w-1", ["p"], ttl=HOUR, now=issued)
    assert verify_token(SECRET, token).subject == "w-1"  # verified, and remembered
    assert verify_token(SECRET, token, now=(issued + HOUR).timestamp()).subject == "w-1"  # within the leeway
    with pytest.raises(InvalidToken):
        verify_token(SECRET, token, now=(issued + HOUR + timedelta(minutes=1)).timestamp())


def test_a_remembered_token_is_only_good_for_the_secret_that_signed_it() -> None:
    token = issue_token(SECRET, Role.OPERATOR, "ops", ttl=HOUR)
    verify_token(SECRET, token)
    with pytest.raises(InvalidToken):
        verify_token(b"y" * 32, token)


@pytest.mark.parametrize(
    "change",
    [
        {"role": "admin"},
        {"projects": "proj-1"},
        {"projects": ["has space"]},
        {"sub": ""},
        {"iss": "someone-else"},
        {"role": "user", "projects": []},
    ],
)
def test_a_signed_token_with_claims_outside_the_contract_is_refused(change: dict[str, object]) -> None:
    now = int(datetime.now(UTC).timestamp())
    claims = {"iss": ISSUER, "sub": "u", "role": "user", "projects": ["p"], "iat": now, "exp": now + 60} | change
    with pytest.raises(InvalidToken):
        verify_token(SECRET, jwt.encode(claims, SECRET, algorithm="HS256"))


@pytest.mark.parametrize("claim", ["exp", "iat"])
def test_a_token_whose_dates_are_numeric_strings_is_refused(claim: str) -> None:
    now = int(datetime.now(UTC).timestamp())
    claims = {"iss": ISSUER, "sub": "u", "role": "user", "projects": ["p"], "iat": now, "exp": now + 60}
    assert verify_token(SECRET, jwt.encode(claims, SECRET, algorithm="HS256")).subject == "u"
    claims[claim] = str(claims[claim])
    with pytest.raises(InvalidToken, match="NumericDate"):
        verify_token(SECRET, jwt.encode(claims, SECRET, algorithm="HS256"))


def test_a_token_missing_a_claim_is_refused() -> None:
    now = int(datetime.now(UTC).timestamp())
    claims = {"iss": ISSUER, "sub": "u", "role": "user", "iat": now, "exp": now + 60}
    with pytest.raises(InvalidToken):
        verify_token(SECRET, jwt.encode(claims, SECRET, algorithm="HS256"))


@pytest.mark.parametrize("garbage", ["", "abc", "a.b.c", "Bearer x"])
def test_garbage_is_refused(garbage: str) -> None:
    with pytest.raises(InvalidToken):
        verify_token(SECRET, garbage)


def test_worker_and_user_tokens_need_a_project() -> None:
    with pytest.raises(ValueError, match="project"):
        issue_token(SECRET, Role.WORKER, "w", [], ttl=HOUR)


def test_a_short_secret_is_refused() -> None:
    with pytest.raises(ValueError, match="32 bytes"):
        issue_token(b"short", Role.OPERATOR, "ops", ttl=HOUR)


def test_only_the_worker_itself_or_an_operator_may_report_as_a_worker() -> None:
    worker = Principal("w-1", Role.WORKER, frozenset({"p"}))
    assert worker.may_report_as("w-1")
    assert not worker.may_report_as("w-2")
    assert not Principal("w-1", Role.USER, frozenset({"p"})).may_report_as("w-1")
    assert Principal("ops", Role.OPERATOR, frozenset()).may_report_as("w-2")


def test_an_operator_sees_every_project_and_a_user_only_theirs() -> None:
    assert Principal("ops", Role.OPERATOR, frozenset()).sees("any")
    user = Principal("u", Role.USER, frozenset({"p1"}))
    assert user.sees("p1")
    assert not user.sees("p2")


def test_the_generated_secret_is_created_once_private_and_reused(tmp_path) -> None:
    first = load_or_create_secret(tmp_path / "data")
    assert len(first) >= 32
    assert load_or_create_secret(tmp_path / "data") == first
    assert (tmp_path / "data" / "api-token-secret").stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "data").stat().st_mode & 0o777 == 0o700


def test_the_data_dir_is_made_private(tmp_path) -> None:
    (tmp_path / "data").mkdir(mode=0o755)  # as an earlier version left it
    token_secret(Settings(data_dir=tmp_path / "data"), ApiSettings())
    assert (tmp_path / "data").stat().st_mode & 0o777 == 0o700

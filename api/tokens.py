"""Bearer tokens: HS256-signed JWTs (RFC 7519) naming a role, a subject and the projects it may see.

Claims: `iss` = `ctxbudget`, `sub` (a worker id for workers, a user id for users), `role` (`worker`, `user`,
`operator`), `projects` (the project ids a worker reports for or a user reads; operators see every project), `iat`,
`exp`. Verification pins the algorithm and requires every claim, so `alg: none`, a token signed with another secret,
an expired token and a token of an unknown role are all rejected. The secret is one HMAC key per deployment (the
API and `ctxbudget token` read the same one); rotating it revokes every token.
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from pathlib import Path

import jwt
from pydantic import TypeAdapter

from schemas.base import Id, IdList

ISSUER = "ctxbudget"
ALGORITHM = "HS256"
MIN_SECRET_BYTES = 32
"""RFC 7518 3.2: an HS256 key of at least the hash's size."""
LEEWAY_SECONDS = 30
"""Clock skew tolerated between the machine that issued a token and the API."""
SECRET_FILE = "api-token-secret"


class Role(StrEnum):
    WORKER = "worker"
    USER = "user"
    OPERATOR = "operator"


class InvalidToken(ValueError):
    """Missing, malformed, forged, expired or with claims outside the contract."""


@dataclass(frozen=True)
class Principal:
    """Who calls: what a verified token says."""

    subject: str
    role: Role
    projects: frozenset[str]

    def sees(self, project_id: str) -> bool:
        return self.role is Role.OPERATOR or project_id in self.projects

    def may_report_as(self, worker_id: str) -> bool:
        return self.role is Role.OPERATOR or (self.role is Role.WORKER and self.subject == worker_id)


_SUBJECT: TypeAdapter[str] = TypeAdapter(Id)
_PROJECTS: TypeAdapter[list[str]] = TypeAdapter(IdList)


def issue_token(
    secret: bytes,
    role: Role,
    subject: str,
    projects: Iterable[str] = (),
    *,
    ttl: timedelta,
    now: datetime | None = None,
) -> str:
    """A signed token; workers and users need at least one project."""
    subject, granted = _validate_claims(subject, role, sorted(set(projects)))
    issued = now or datetime.now(UTC)
    claims = {
        "iss": ISSUER,
        "sub": subject,
        "role": role.value,
        "projects": granted,
        "iat": int(issued.timestamp()),
        "exp": int((issued + ttl).timestamp()),
    }
    return jwt.encode(claims, _key(secret), algorithm=ALGORITHM)


VERIFIED_CACHE_SIZE = 4_096
_verified: dict[tuple[bytes, str], tuple[Principal, int]] = {}
"""Tokens whose signature and claims were checked, with their `exp`: a worker sends the same token with every report,
and checking its HMAC and claims again cost a tenth of a report's time. Oldest first; a passed `exp` still refuses."""


def verify_token(secret: bytes, token: str, now: float | None = None) -> Principal:
    """The token's principal; InvalidToken for a forged, malformed or expired one (`now`: epoch seconds, for tests
    of the cache; PyJWT reads the clock itself)."""
    cached = _verified.get((secret, token))
    if cached is not None:
        principal, expires = cached
        if (time.time() if now is None else now) >= expires + LEEWAY_SECONDS:
            del _verified[(secret, token)]
            raise InvalidToken("Signature has expired")
        return principal
    principal, expires = _verify(secret, token)
    if len(_verified) >= VERIFIED_CACHE_SIZE:
        del _verified[next(iter(_verified))]
    _verified[(secret, token)] = (principal, expires)
    return principal


def _verify(secret: bytes, token: str) -> tuple[Principal, int]:
    try:
        claims = jwt.decode(
            token,
            _key(secret),
            algorithms=[ALGORITHM],
            issuer=ISSUER,
            leeway=LEEWAY_SECONDS,
            options={"require": ["iss", "sub", "role", "projects", "iat", "exp"]},
        )
    except jwt.PyJWTError as error:
        raise InvalidToken(str(error)) from error
    if not all(_numeric_date(claims[name]) for name in ("iat", "exp")):
        raise InvalidToken("iat and exp must be numbers (RFC 7519 NumericDate)")  # PyJWT takes "123" as well
    try:
        role = Role(claims["role"])
        subject, projects = _validate_claims(claims["sub"], role, claims["projects"])
    except ValueError as error:  # ValidationError is one too
        raise InvalidToken("claims outside the contract") from error
    return Principal(subject, role, frozenset(projects)), int(claims["exp"])


def _numeric_date(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _validate_claims(subject: object, role: Role, projects: object) -> tuple[str, list[str]]:
    valid_subject = _SUBJECT.validate_python(subject, strict=True)
    valid_projects = _PROJECTS.validate_python(projects, strict=True)
    if role is not Role.OPERATOR and not valid_projects:
        raise ValueError(f"a {role} token needs at least one project")
    return valid_subject, valid_projects


def _key(secret: bytes) -> bytes:
    if len(secret) < MIN_SECRET_BYTES:
        raise ValueError(f"the token secret must have at least {MIN_SECRET_BYTES} bytes")
    return secret


def load_or_create_secret(data_dir: Path) -> bytes:
    """The deployment's secret kept in `data_dir` (mode 0600), created at random on first use."""
    path = data_dir / SECRET_FILE
    if not path.exists():
        data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass  # another process created it first: read theirs
        else:
            with os.fdopen(fd, "w") as out:
                out.write(secrets.token_urlsafe(48))
    return path.read_text().strip().encode()

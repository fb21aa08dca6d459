from __future__ import annotations

from pathlib import Path

import pytest

from core.settings import Settings


def test_environment_overrides_with_ctxbudget_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXBUDGET_KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:9092")
    monkeypatch.setenv("CTXBUDGET_CLICKHOUSE_DSN", "http://default:@127.0.0.1:8123/default")
    monkeypatch.setenv("CTXBUDGET_TOPIC_PREFIX", "staging.")
    monkeypatch.setenv("CTXBUDGET_TOPIC_PARTITIONS", "12")
    settings = Settings()
    assert settings.kafka_bootstrap_servers == "127.0.0.1:9092"
    assert settings.clickhouse_url == "http://default:@127.0.0.1:8123/default"
    assert settings.topic("snapshots") == "staging.snapshots"
    assert settings.topic_partitions == 12


def test_embedded_defaults(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("CTXBUDGET_KAFKA_BOOTSTRAP_SERVERS", "CTXBUDGET_CLICKHOUSE_DSN", "CTXBUDGET_TOPIC_PREFIX"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    settings = Settings()
    assert settings.kafka_bootstrap_servers is None
    assert settings.topic("snapshots") == "ctx.snapshots"
    assert settings.clickhouse_url == f"chdb://{tmp_path.resolve() / 'var' / 'clickhouse'}"


def test_partitions_must_be_positive() -> None:
    with pytest.raises(ValueError, match="topic_partitions"):
        Settings(topic_partitions=0)


def test_roles_are_comma_separated_and_each_set_is_its_own_group(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Settings().faust_app_id == "ctxbudget"  # every role: the group and changelogs of a single worker
    monkeypatch.setenv("CTXBUDGET_ROLES", "sinks, engine")
    settings = Settings()
    assert settings.roles == {"engine", "sinks"}
    assert settings.faust_app_id == "ctxbudget-engine-sinks"  # in a fixed order, whatever order was given
    assert Settings(roles="engine,projection,aggregates,sinks").faust_app_id == "ctxbudget"


@pytest.mark.parametrize("roles", ["", "engine,bogus"])
def test_no_role_or_an_unknown_one_is_refused(roles: str) -> None:
    with pytest.raises(ValueError, match="roles"):
        Settings(roles=roles)

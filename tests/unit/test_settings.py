from __future__ import annotations

from pathlib import Path

import pytest

from streams.settings import Settings


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

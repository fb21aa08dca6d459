"""The one settings object of the pipeline, read from `CTXBUDGET_*` environment variables (or a `.env` file).

Every process (worker, sinks, CLI, API) builds its configuration from here, so a value means the same thing everywhere.
"""

from __future__ import annotations

import os
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

DEFAULT_KAFKA_VERSION = "4.1.1"
Role = Literal["engine", "projection", "aggregates", "sinks"]
ROLES: tuple[Role, ...] = ("engine", "projection", "aggregates", "sinks")
"""What one worker process can run: the thread engine (with policies and alert commands), the token projection, the
project and conversation aggregates, the ClickHouse sinks."""


def default_worker_state_dir() -> Path:
    """`$XDG_STATE_HOME/ctxbudget`, else `~/.local/state/ctxbudget` (the XDG spec ignores a relative XDG_STATE_HOME)."""
    xdg = os.environ.get("XDG_STATE_HOME")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".local" / "state"
    return base / "ctxbudget"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CTXBUDGET_", env_file=".env", extra="ignore")

    data_dir: Path = Field(
        default=Path("var"),
        description="Local state: the embedded broker's log dirs, the chdb database, Faust table stores.",
    )
    worker_state_dir: Path = Field(
        default_factory=default_worker_state_dir,
        description="The worker side's state (reporter spool, relay outbox, handoff inbox and patches, hooks' memory, "
        "status-line spool, read positions), shared by `report`, the hooks, `statusline` and `handoff write`. "
        "Absolute: those commands run in the agent's working directory, which must never receive it.",
    )
    kafka_bootstrap_servers: str | None = Field(
        default=None,
        description="host:port[,host:port]. Unset: the local Apache Kafka under data_dir (`ctxbudget kafka up`).",
    )
    kafka_version: str = Field(default=DEFAULT_KAFKA_VERSION, description="Apache Kafka release for the local broker.")
    kafka_cache_dir: Path = Field(
        default=Path.home() / ".cache" / "ctxbudget",
        description="Where the local broker's jars are resolved to (outside git).",
    )
    clickhouse_dsn: str | None = Field(
        default=None,
        description="clickhouse-connect DSN. Unset: embedded chdb at chdb:///<data_dir>/clickhouse. "
        "A server: http://user:pass@host:8123/db",
    )
    topic_prefix: str = Field(default="ctx.", description="Prefix of every topic name of the topology.")
    topic_partitions: int = Field(default=4, ge=1, le=1024, description="Partitions of every input/output topic.")
    topic_replication_factor: int = Field(default=1, ge=1, le=16)
    log_level: str = Field(default="WARN", description="Worker log level: DEBUG, INFO, WARN, ERROR.")
    log_format: Literal["json", "text"] = Field(default="json", description="json: one object per line.")
    worker_web_port: int | None = Field(
        default=6066, ge=1, le=65535, description="Port of the worker's /healthz, /readyz and /metrics."
    )
    worker_web_bind: str = Field(default="127.0.0.1", description="Address of the worker's web server.")
    progress_seconds: float = Field(default=10.0, gt=0, description="How often `ctxbudget run` prints its progress.")
    shutdown_seconds: float = Field(
        default=30,
        gt=0,
        description="How long a worker may take to stop after SIGINT/SIGTERM. Past it (or on a second signal) it "
        "writes every thread's and task's stack to stderr and exits 1 without finishing, as a kill would: a restart "
        "reads again whatever was not committed.",
    )
    stuck_rebalance_seconds: float = Field(
        default=120,
        gt=0,
        description="A rebalance (group join, table recovery) that makes no progress for this long is logged once, "
        "with what it waits for, and fails /healthz so that a supervisor restarts the worker.",
    )
    app_id: str = Field(default="ctxbudget", description="Faust application id (consumer group, changelog names).")
    roles: Annotated[frozenset[Role], NoDecode] = Field(
        default=frozenset(ROLES),
        min_length=1,
        description="What this worker runs, comma-separated (engine,projection,aggregates,sinks; default all). "
        "Processes with different roles share the work, each role set in its own consumer group.",
    )

    # Engine
    stale_factor: float = Field(default=3.0, gt=1, description="Stale after this many missed report intervals.")
    risk_horizon_seconds: float = Field(default=300, gt=0, description="Compaction this close with must-finish = risk.")
    handoff_missing_grace_seconds: float = Field(default=60, ge=0)
    handoff_ttl_seconds: float = Field(default=7200, gt=0)
    tick_seconds: float = Field(default=1.0, gt=0, description="How often timers look for stale threads etc.")
    batch_size: int = Field(default=2000, ge=1, description="Records the engine folds per batch at most.")
    batch_seconds: float = Field(default=0.05, gt=0, description="How long the engine waits to fill a batch.")

    # Sinks (issue 5): ClickHouse's guidance is 10k-100k rows per insert and about one insert per second per table.
    sink_batch_rows: int = Field(default=10_000, ge=1, description="A sink inserts a partition's batch at this size...")
    sink_batch_ms: float = Field(default=1_000, gt=0, description="... or once its first record waited this long.")
    clickhouse_history_ttl_days: int | None = Field(
        default=365, ge=1, description="History tables drop rows older than this; None keeps them forever."
    )

    # Project risk (issue 4)
    project_retire_seconds: float = Field(
        default=1800, gt=0, description="A thread unchanged this long leaves its project's risk view (finished)."
    )

    @field_validator("worker_state_dir")
    @classmethod
    def _absolute(cls, value: Path) -> Path:
        value = value.expanduser()
        if not value.is_absolute():
            raise ValueError(f"CTXBUDGET_WORKER_STATE_DIR must be absolute (it would land in the agent's cwd): {value}")
        return value

    @field_validator("roles", mode="before")
    @classmethod
    def _comma_separated(cls, value: Any) -> Any:
        return frozenset(r.strip() for r in value.split(",") if r.strip()) if isinstance(value, str) else value

    @property
    def role_list(self) -> list[Role]:
        """The roles in their fixed order (`ROLES`), whatever order they were given in."""
        return [role for role in ROLES if role in self.roles]

    @property
    def faust_app_id(self) -> str:
        """The id of this worker's Faust app: its consumer group and the prefix of its table changelogs. A worker
        with every role is `app_id`; one with some roles gets a group (and tables) of its own, since a Kafka group
        shares one subscription and each role reads different topics."""
        if self.roles == frozenset(ROLES):
            return self.app_id
        return "-".join([self.app_id, *self.role_list])

    @cached_property
    def resolved_data_dir(self) -> Path:
        return self.data_dir.expanduser().resolve()

    def private_data_dir(self, *parts: str) -> Path:
        """The data dir (or a folder in it), created if missing, and the data dir readable by its owner only: it
        holds the token secret, the operator token and the database."""
        data_dir = self.resolved_data_dir
        path = data_dir.joinpath(*parts)
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        for folder in {data_dir, path}:
            folder.chmod(0o700)
        return path

    @property
    def clickhouse_url(self) -> str:
        return self.clickhouse_dsn or f"chdb://{self.resolved_data_dir / 'clickhouse'}"

    def topic(self, name: str) -> str:
        """The full topic name of a topology topic (`snapshots` -> `ctx.snapshots`)."""
        return f"{self.topic_prefix}{name}"

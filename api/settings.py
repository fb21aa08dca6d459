"""Settings of the HTTP API, read from `CTXBUDGET_API_*` environment variables beside the pipeline's `Settings`."""

from __future__ import annotations

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from api.bodies import BODY_TIMEOUT_SECONDS
from api.tokens import load_or_create_secret
from core.relay_schedule import DEFAULT_PER_NODE, DEFAULT_PER_PROJECT, DEFAULT_REPEAT_SECONDS, RelayLimits
from core.settings import Settings
from core.topics import MAX_INPUT_BYTES

DEFAULT_PORT = 8080


class ApiSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CTXBUDGET_API_", env_file=".env", extra="ignore")

    host: str = Field(default="127.0.0.1", description="Address the API listens on.")
    port: int = Field(default=DEFAULT_PORT, ge=0, le=65535, description="Port the API listens on (0: any free one).")
    token_secret: SecretStr | None = Field(
        default=None,
        description="HMAC secret that signs bearer tokens (>= 32 bytes). Unset: a random one kept in "
        "<data_dir>/api-token-secret, created on first use.",
    )
    token_ttl_seconds: int = Field(
        default=12 * 3600,
        gt=0,
        description="Lifetime of the tokens the CLI issues (`ctxbudget token --ttl-days` for a longer-lived one).",
    )
    max_report_bytes: int = Field(default=16_384, gt=0, description="Largest 5.2 report body; larger answers 413.")
    max_package_bytes: int = Field(
        default=MAX_INPUT_BYTES,
        gt=0,
        le=MAX_INPUT_BYTES,
        description="Largest handoff package or session-event body: at most the inputs' limit, whose outputs are sized "
        "to fit every topic (core/topics.py).",
    )
    body_timeout_seconds: float = Field(
        default=BODY_TIMEOUT_SECONDS, gt=0, description="How long a request body may take to arrive; slower is 408."
    )
    kafka_timeout_seconds: float = Field(
        default=10.0, gt=0, description="How long a write waits for Kafka's acknowledgement before answering 503."
    )
    consume_verdict_seconds: float = Field(
        default=2.0,
        ge=0,
        description="How long a consume waits for the engine to apply it before answering with the version published "
        "(a worker's hook waits for the answer, so well under its 3 s).",
    )
    mcp_session_idle_seconds: float = Field(
        default=600.0,
        gt=0,
        description="An MCP session with no request in flight and no open stream this long is closed, and its "
        "subscriptions end with it.",
    )
    sse_heartbeat_seconds: float = Field(default=15.0, gt=0, description="Idle time before an SSE heartbeat.")
    sse_queue_size: int = Field(
        default=1_000, gt=0, description="Events buffered per SSE client; a client this far behind is dropped."
    )
    sql_max_result_rows: int = Field(
        default=100_000, gt=0, description="`POST /api/v1/sql`: a result with more rows is refused (400)."
    )
    sql_max_execution_seconds: float = Field(
        default=30.0, gt=0, description="`POST /api/v1/sql`: a query running longer is stopped (400)."
    )
    sql_max_result_bytes: int = Field(
        default=32 * 1024 * 1024,
        gt=0,
        description="`POST /api/v1/sql`: a result of more bytes (uncompressed, as ClickHouse counts) is refused (400).",
    )
    sql_max_memory_bytes: int = Field(
        default=512 * 1024 * 1024, gt=0, description="`POST /api/v1/sql`: a query needing more memory is stopped (400)."
    )
    sql_max_query_bytes: int = Field(default=65_536, gt=0, description="Largest SQL query body; larger answers 413.")
    relay_cap_per_node: int = Field(
        default=DEFAULT_PER_NODE,
        ge=1,
        description="Relays (handoff requested -> package consumed) a worker node runs at once; the relay schedule "
        "queues the rest in the spec 8.1 order.",
    )
    relay_cap_per_project: int = Field(
        default=DEFAULT_PER_PROJECT, ge=1, description="Relays a project runs at once; the rest wait likewise."
    )
    relay_repeat_seconds: float = Field(
        default=DEFAULT_REPEAT_SECONDS,
        ge=0,
        description="The same work (a thread, or its task) relayed again sooner than this is a futile relay: the "
        "schedule refuses it and says why.",
    )

    @property
    def relay_limits(self) -> RelayLimits:
        return RelayLimits(self.relay_cap_per_node, self.relay_cap_per_project, self.relay_repeat_seconds)


def token_secret(settings: Settings, api: ApiSettings) -> bytes:
    """The configured secret, else the deployment's generated one under the data dir (shared by API and CLI)."""
    configured = api.token_secret
    return configured.get_secret_value().encode() if configured else load_or_create_secret(settings.private_data_dir())

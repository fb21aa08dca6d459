"""Every topic of the topology, declared once with its key, partitions and cleanup policy, and created idempotently.

Auto-creation is off on our brokers: a topic exists because it is declared here. Latest-state topics are compacted (a
reader needs only the newest record per key); event topics keep a time window.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError, for_code

from streams.settings import Settings

WEEK_MS = 7 * 24 * 3600 * 1000
MAX_MESSAGE_BYTES = 4 * 1024 * 1024
"""Dead letters carry a whole input record (up to Kafka's default 1 MB) base64-encoded, so their topic takes more."""


@dataclass(frozen=True)
class TopicSpec:
    name: str
    key: str
    compacted: bool
    doc: str
    retention_ms: int = WEEK_MS
    max_message_bytes: int | None = None

    def configs(self) -> dict[str, str]:
        if self.compacted:
            configs = {"cleanup.policy": "compact", "min.compaction.lag.ms": "0", "segment.ms": str(3600 * 1000)}
        else:
            configs = {"cleanup.policy": "delete", "retention.ms": str(self.retention_ms)}
        if self.max_message_bytes:
            configs["max.message.bytes"] = str(self.max_message_bytes)
        return configs


TOPICS: tuple[TopicSpec, ...] = (
    # inputs
    TopicSpec("snapshots", "thread_id", False, "ThreadContextSnapshot from workers and the estimator"),
    TopicSpec("session-events", "thread_id", False, "SessionEvent union from workers"),
    TopicSpec("handoff-packages", "from_thread_id", False, "HandoffPackage versions"),
    TopicSpec("policies", "project_id (* = default)", True, "ThresholdPolicy per project"),
    TopicSpec("alert-commands", "alert_id", False, "AlertCommand (ack)"),
    TopicSpec("master-action-commands", "thread_id", False, "MasterActionCommand (ack, done) for the engine"),
    TopicSpec("conversations", "conversation_id", True, "Conversation registry"),
    # outputs
    TopicSpec("thread-state", "thread_id", True, "latest derived state of each thread"),
    TopicSpec("context-events", "thread_id", False, "ContextEvent (spec 5.3)"),
    TopicSpec("alerts", "alert_id", False, "ContextAlert transitions (spec 3.4)"),
    TopicSpec("master-actions", "thread_id", False, "MasterActionRecord: every state of each issued action"),
    TopicSpec("client-events", "project_id", False, "ClientEvent: the SSE events of spec 6.4"),
    TopicSpec("project-risk", "project_id", True, "ProjectDetail per project (spec 6.2)"),
    TopicSpec("conversation-indicators", "conversation_id", True, "ConversationItem per conversation (spec 6.1)"),
    TopicSpec("compactions", "thread_id", False, "CompactionFinished: one finished compaction"),
    TopicSpec("snapshot-verdicts", "thread_id", False, "SnapshotVerdict: each snapshot read, accepted or why not"),
    TopicSpec("thread-projections", "thread_id", True, "ThreadProjection: the latest projection of each thread"),
    # internal: repartitions between folds keyed differently
    TopicSpec("alert-commands-by-thread", "thread_id", False, "AlertCommand re-keyed by thread for the engine"),
    TopicSpec("thread-state-by-project", "project_id", False, "ThreadState | ThreadLeft re-keyed by project"),
    TopicSpec("conversation-links", "thread_id", False, "ConversationLink: a conversation shows a thread or stops"),
    TopicSpec("conversation-threads", "conversation_id", False, "ConversationThread: ring values of a shown thread"),
    TopicSpec(
        "deadletter",
        "source key",
        False,
        "DeadLetter: invalid input with reason and original bytes",
        retention_ms=30 * WEEK_MS,
        max_message_bytes=MAX_MESSAGE_BYTES,
    ),
)


async def ensure_topics(settings: Settings, specs: Iterable[TopicSpec] = TOPICS) -> list[str]:
    """Create the declared topics that do not exist yet; return the names created (empty when all existed)."""
    wanted = [
        NewTopic(
            settings.topic(spec.name),
            num_partitions=settings.topic_partitions,
            replication_factor=settings.topic_replication_factor,
            topic_configs=spec.configs(),
        )
        for spec in specs
    ]
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap_servers)
    await admin.start()
    try:
        return await create_missing(admin, wanted)
    finally:
        await admin.close()


async def create_missing(admin: AIOKafkaAdminClient, wanted: Iterable[NewTopic]) -> list[str]:
    """Create those of `wanted` that do not exist; return their names (empty: nothing to do)."""
    existing = set(await admin.list_topics())
    missing = [topic for topic in wanted if topic.name not in existing]
    if missing:
        response = await admin.create_topics(missing)
        for topic, code, *message in response.topic_errors:
            # Another process creating the same topic at the same moment is fine: the topic exists.
            if code and for_code(code) is not TopicAlreadyExistsError:
                raise for_code(code)(f"creating topic {topic}: {message[0] if message else ''}")
    return [topic.name for topic in missing]


def compacted_topics(settings: Settings) -> frozenset[str]:
    """The prefixed names of the compacted topics (latest record per key: their offsets have holes by design)."""
    return frozenset(settings.topic(spec.name) for spec in TOPICS if spec.compacted)


def ensure_topics_sync(settings: Settings) -> list[str]:
    return asyncio.run(ensure_topics(settings))

"""Every topic of the topology, declared once with its key, partitions and cleanup policy (streams/topic_admin.py
creates them idempotently).

Auto-creation is off on our brokers: a topic exists because it is declared here. Latest-state topics are compacted (a
reader needs only the newest record per key); event topics keep a time window.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.settings import Settings

SNAPSHOTS = "snapshots"
SESSION_EVENTS = "session-events"
HANDOFF_PACKAGES = "handoff-packages"
ALERT_COMMANDS_BY_THREAD = "alert-commands-by-thread"
MASTER_ACTION_COMMANDS = "master-action-commands"
THREAD_STATE = "thread-state"
SNAPSHOT_VERDICTS = "snapshot-verdicts"

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
    TopicSpec(SNAPSHOTS, "thread_id", False, "ThreadContextSnapshot from workers and the estimator"),
    TopicSpec(SESSION_EVENTS, "thread_id", False, "SessionEvent union from workers"),
    TopicSpec(HANDOFF_PACKAGES, "from_thread_id", False, "HandoffPackage versions"),
    TopicSpec("policies", "project_id (* = default)", True, "ThresholdPolicy per project"),
    TopicSpec("alert-commands", "alert_id", False, "AlertCommand (ack)"),
    TopicSpec(MASTER_ACTION_COMMANDS, "thread_id", False, "MasterActionCommand (ack, done, request) for the engine"),
    TopicSpec("conversations", "conversation_id", True, "Conversation registry"),
    TopicSpec("task-importance", "thread_id", True, "TaskImportance: the importance of each thread's task"),
    # outputs
    TopicSpec(THREAD_STATE, "thread_id", True, "latest derived state of each thread"),
    TopicSpec("context-events", "thread_id", False, "ContextEvent (spec 5.3)"),
    TopicSpec("alerts", "alert_id", False, "ContextAlert transitions (spec 3.4)"),
    TopicSpec("master-actions", "thread_id", False, "MasterActionRecord: every state of each issued action"),
    TopicSpec("client-events", "project_id", False, "ClientEvent: the SSE events of spec 6.4"),
    TopicSpec("project-risk", "project_id", True, "ProjectDetail per project (spec 6.2)"),
    TopicSpec("conversation-indicators", "conversation_id", True, "ConversationItem per conversation (spec 6.1)"),
    TopicSpec("compactions", "thread_id", False, "CompactionFinished: one finished compaction"),
    TopicSpec(SNAPSHOT_VERDICTS, "thread_id", False, "SnapshotVerdict: each snapshot read, accepted or why not"),
    TopicSpec("thread-projections", "thread_id", True, "ThreadProjection: the latest projection of each thread"),
    # internal: repartitions between folds keyed differently
    TopicSpec(ALERT_COMMANDS_BY_THREAD, "thread_id", False, "AlertCommand re-keyed by thread for the engine"),
    TopicSpec("thread-state-by-project", "project_id", False, "ThreadState | ThreadLeft re-keyed by project"),
    TopicSpec("conversation-links", "thread_id", False, "ConversationLink: a conversation shows a thread or stops"),
    TopicSpec(
        "conversation-threads",
        "conversation_id",
        False,
        "ConversationThread: ring values of a shown thread; ConversationRelay",
    ),
    TopicSpec(
        "deadletter",
        "source key",
        False,
        "DeadLetter: invalid input with reason and original bytes",
        retention_ms=30 * WEEK_MS,
        max_message_bytes=MAX_MESSAGE_BYTES,
    ),
)


def compacted_topics(settings: Settings) -> frozenset[str]:
    """The prefixed names of the compacted topics (latest record per key: their offsets have holes by design)."""
    return frozenset(settings.topic(spec.name) for spec in TOPICS if spec.compacted)

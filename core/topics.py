"""Every topic of the topology, declared once with its key, partitions and cleanup policy (streams/topic_admin.py
creates them idempotently).

Auto-creation is off on our brokers: a topic exists because it is declared here. Latest-state topics are compacted (a
reader needs only the newest record per key); event topics keep a time window.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.settings import Settings

# inputs
SNAPSHOTS = "snapshots"
SESSION_EVENTS = "session-events"
HANDOFF_PACKAGES = "handoff-packages"
POLICIES = "policies"
ALERT_COMMANDS = "alert-commands"
MASTER_ACTION_COMMANDS = "master-action-commands"
CONVERSATIONS = "conversations"
TASK_IMPORTANCE = "task-importance"
# outputs
THREAD_STATE = "thread-state"
CONTEXT_EVENTS = "context-events"
ALERTS = "alerts"
MASTER_ACTIONS = "master-actions"
CLIENT_EVENTS = "client-events"
PROJECT_RISK = "project-risk"
CONVERSATION_INDICATORS = "conversation-indicators"
COMPACTIONS = "compactions"
SNAPSHOT_VERDICTS = "snapshot-verdicts"
THREAD_PROJECTIONS = "thread-projections"
COMPACTION_POINTS = "compaction-points"
# internal
ALERT_COMMANDS_BY_THREAD = "alert-commands-by-thread"
THREAD_STATE_BY_PROJECT = "thread-state-by-project"
CONVERSATION_LINKS = "conversation-links"
CONVERSATION_THREADS = "conversation-threads"
COMPACTION_SAMPLES = "compaction-samples"
DEADLETTER = "deadletter"

WEEK_MS = 7 * 24 * 3600 * 1000
MAX_INPUT_BYTES = 1024 * 1024
"""The largest record a writer of ours puts on an input topic (the API's largest body, `api.settings`)."""
MAX_MESSAGE_BYTES = 4 * MAX_INPUT_BYTES
"""Every topic's `max.message.bytes` (table changelogs too), and the most any output record may weigh: what one input
causes can be several times its size (a thread's state holds its package, and a checklist copied from it, twice), so
outputs get room above the inputs. An output larger still is not sent: its input is dead-lettered
(`streams.runtime.agents`, `output_too_large`), since a record Kafka refuses would stop its partition for good."""
DEADLETTER_MAX_BYTES = MAX_MESSAGE_BYTES * 3 // 2
"""A dead letter carries its input whole, base64-encoded (4/3 of its size), with a detail of up to 64 KiB."""
MESSAGE_SIZE_CONFIGS = {"max.message.bytes": str(MAX_MESSAGE_BYTES)}


@dataclass(frozen=True)
class TopicSpec:
    name: str
    key: str
    compacted: bool
    doc: str
    retention_ms: int = WEEK_MS
    max_message_bytes: int = MAX_MESSAGE_BYTES

    def configs(self) -> dict[str, str]:
        if self.compacted:
            configs = {"cleanup.policy": "compact", "min.compaction.lag.ms": "0", "segment.ms": str(3600 * 1000)}
        else:
            configs = {"cleanup.policy": "delete", "retention.ms": str(self.retention_ms)}
        configs["max.message.bytes"] = str(self.max_message_bytes)
        return configs


TOPICS: tuple[TopicSpec, ...] = (
    # inputs
    TopicSpec(SNAPSHOTS, "thread_id", False, "ThreadContextSnapshot from workers and the estimator"),
    TopicSpec(SESSION_EVENTS, "thread_id", False, "SessionEvent union from workers"),
    TopicSpec(HANDOFF_PACKAGES, "from_thread_id", False, "HandoffPackage versions"),
    TopicSpec(POLICIES, "project_id (* = default)", True, "ThresholdPolicy per project"),
    TopicSpec(ALERT_COMMANDS, "alert_id", False, "AlertCommand (ack)"),
    TopicSpec(MASTER_ACTION_COMMANDS, "thread_id", False, "MasterActionCommand (ack, done, request) for the engine"),
    TopicSpec(CONVERSATIONS, "conversation_id", True, "Conversation registry"),
    TopicSpec(TASK_IMPORTANCE, "thread_id", True, "TaskImportance: the importance of each thread's task"),
    # outputs
    TopicSpec(THREAD_STATE, "thread_id", True, "latest derived state of each thread"),
    TopicSpec(CONTEXT_EVENTS, "thread_id", False, "ContextEvent (spec 5.3)"),
    TopicSpec(ALERTS, "alert_id", False, "ContextAlert transitions (spec 3.4)"),
    TopicSpec(MASTER_ACTIONS, "thread_id", False, "MasterActionRecord: every state of each issued action"),
    TopicSpec(CLIENT_EVENTS, "project_id", False, "ClientEvent: the SSE events of spec 6.4"),
    TopicSpec(PROJECT_RISK, "project_id", True, "ProjectDetail per project (spec 6.2)"),
    TopicSpec(CONVERSATION_INDICATORS, "conversation_id", True, "ConversationItem per conversation (spec 6.1)"),
    TopicSpec(COMPACTIONS, "thread_id", False, "CompactionFinished: one finished compaction"),
    TopicSpec(SNAPSHOT_VERDICTS, "thread_id", False, "SnapshotVerdict: each snapshot read, accepted or why not"),
    TopicSpec(THREAD_PROJECTIONS, "thread_id", True, "ThreadProjection: the latest projection of each thread"),
    TopicSpec(
        COMPACTION_POINTS,
        "point key",
        True,
        "CompactionPoint: where the fleet sees a tool (version, model, window) compact",
    ),
    # internal: repartitions between folds keyed differently
    TopicSpec(ALERT_COMMANDS_BY_THREAD, "thread_id", False, "AlertCommand re-keyed by thread for the engine"),
    TopicSpec(THREAD_STATE_BY_PROJECT, "project_id", False, "ThreadState | ThreadLeft re-keyed by project"),
    TopicSpec(COMPACTION_SAMPLES, "point key", False, "CompactionFinished re-keyed by the point it teaches"),
    TopicSpec(CONVERSATION_LINKS, "thread_id", False, "ConversationLink: a conversation shows a thread or stops"),
    TopicSpec(
        CONVERSATION_THREADS,
        "conversation_id",
        False,
        "ConversationThread: ring values of a shown thread; ConversationRelay",
    ),
    TopicSpec(
        DEADLETTER,
        "source key",
        False,
        "DeadLetter: invalid input with reason and original bytes",
        retention_ms=30 * WEEK_MS,
        max_message_bytes=DEADLETTER_MAX_BYTES,
    ),
)


def max_message_bytes(unprefixed: str) -> int:
    """The most one record of `unprefixed` (a topic of `TOPICS`, or a table's changelog) may weigh."""
    return DEADLETTER_MAX_BYTES if unprefixed == DEADLETTER else MAX_MESSAGE_BYTES


def compacted_topics(settings: Settings) -> frozenset[str]:
    """The prefixed names of the compacted topics (latest record per key: their offsets have holes by design)."""
    return frozenset(settings.topic(spec.name) for spec in TOPICS if spec.compacted)

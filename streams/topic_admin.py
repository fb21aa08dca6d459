"""`ctxbudget topics create|describe`: every topic of the topology with its declared shape, and the drift from it.

Declared = the topics of `core.topics.TOPICS` plus the changelog of every table the topology registers (Faust
names them `<faust_app_id>-<table>-changelog`; compacted, one partition per input partition). `create` makes the missing
ones and never alters an existing topic: what differs is reported as drift for an operator to decide. `ensure_topics`
creates the declared topics that are missing, for the processes that start before the worker.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import TopicAlreadyExistsError, for_code

from core.settings import Settings
from core.topics import MESSAGE_SIZE_CONFIGS, TOPICS, TopicSpec

CHANGELOG_CONFIGS = {"cleanup.policy": "compact", **MESSAGE_SIZE_CONFIGS}
"""What the tables declare for their changelogs (`streams.runtime.agents`): the latest value per key is the table, and
a state may weigh what an output may."""
SERVED_WITHIN_SECONDS = 30.0
"""How long a created topic may take to appear in the broker's metadata."""


@dataclass(frozen=True)
class TopicShape:
    """A topic as the topology declares it, or as the broker has it."""

    name: str
    partitions: int
    replication_factor: int
    configs: Mapping[str, str]


@dataclass(frozen=True)
class Drift:
    topic: str
    setting: str
    declared: str
    actual: str | None
    """None: the topic does not exist."""


def declared_topics(settings: Settings, tables: Iterable[str]) -> list[TopicShape]:
    """Every topic the topology needs; `tables` are the names of its Faust tables (their changelogs)."""
    partitions, replication = settings.topic_partitions, settings.topic_replication_factor
    topics = [TopicShape(settings.topic(s.name), partitions, replication, s.configs()) for s in TOPICS]
    changelogs = [
        TopicShape(f"{settings.faust_app_id}-{table}-changelog", partitions, replication, CHANGELOG_CONFIGS)
        for table in sorted(tables)
    ]
    return topics + changelogs


def topology_tables(settings: Settings) -> list[str]:
    """The table names the worker registers, read from the topology's declaration (Faust names each after it)."""
    from streams.topology import declared

    return list(declared(settings).tables)


def drift(declared: TopicShape, actual: TopicShape | None) -> list[Drift]:
    """What differs between the declaration and the broker (nothing for a topic that matches)."""
    if actual is None:
        return [Drift(declared.name, "exists", "yes", None)]
    wanted = {
        "partitions": str(declared.partitions),
        "replication.factor": str(declared.replication_factor),
        **declared.configs,
    }
    have = {
        "partitions": str(actual.partitions),
        "replication.factor": str(actual.replication_factor),
        **actual.configs,
    }
    return [Drift(declared.name, k, v, have.get(k)) for k, v in wanted.items() if have.get(k) != v]


# -- the broker ------------------------------------------------------------------------------------------------------
async def actual_topics(admin: AIOKafkaAdminClient, names: Sequence[str]) -> dict[str, TopicShape]:
    """The broker's view of those of `names` that exist: partitions, replication factor, every config value."""
    existing = set(await admin.list_topics())
    present = [name for name in names if name in existing]
    if not present:
        return {}
    metadata = {t["topic"]: t["partitions"] for t in await admin.describe_topics(present)}
    resources = [ConfigResource(ConfigResourceType.TOPIC, name) for name in present]
    configs: dict[str, dict[str, str]] = {}
    for response in await admin.describe_configs(resources):
        for resource in response.to_object()["resources"]:
            entries = resource["config_entries"]
            configs[resource["resource_name"]] = {e["config_names"]: e["config_value"] for e in entries}
    return {
        name: TopicShape(
            name,
            partitions=len(metadata[name]),
            replication_factor=max((len(p["replicas"]) for p in metadata[name]), default=0),
            configs=configs.get(name, {}),
        )
        for name in present
    }


async def describe(settings: Settings, declared: Sequence[TopicShape]) -> list[Drift]:
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap_servers)
    await admin.start()
    try:
        actual = await actual_topics(admin, [t.name for t in declared])
    finally:
        await admin.close()
    return [d for topic in declared for d in drift(topic, actual.get(topic.name))]


async def create(settings: Settings, declared: Sequence[TopicShape]) -> list[str]:
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap_servers)
    await admin.start()
    try:
        wanted = [
            NewTopic(t.name, num_partitions=t.partitions, replication_factor=t.replication_factor,
                     topic_configs=dict(t.configs))
            for t in declared
        ]  # fmt: skip
        return await create_missing(admin, wanted)
    finally:
        await admin.close()


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
    if not missing:
        return []
    response = await admin.create_topics(missing)
    created = {topic.name for topic in missing}
    for topic, code, *message in response.topic_errors:
        if code and for_code(code) is TopicAlreadyExistsError:
            # Created by another process at the same moment, or listed late: a broker's metadata can trail a
            # creation it has acknowledged. Either way the topic exists and this call did not create it.
            created.discard(topic)
        elif code:
            raise for_code(code)(f"creating topic {topic}: {message[0] if message else ''}")
    await _until_served(admin, {t.name: t.num_partitions for t in missing})
    return [topic.name for topic in missing if topic.name in created]


async def _until_served(admin: AIOKafkaAdminClient, partitions: Mapping[str, int]) -> None:
    """Until the broker's metadata has every one of `partitions`' topics with its partitions: it acknowledges a
    creation before its metadata serves the topic, and whoever called this (a worker, a producer) reads it next."""
    deadline = asyncio.get_running_loop().time() + SERVED_WITHIN_SECONDS
    while True:
        described = {t["topic"]: len(t["partitions"]) for t in await admin.describe_topics(list(partitions))}
        waiting = sorted(name for name, count in partitions.items() if described.get(name, 0) < count)
        if not waiting:
            return
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError(f"created but not served within {SERVED_WITHIN_SECONDS:.0f} s: {', '.join(waiting)}")
        await asyncio.sleep(0.1)


def ensure_topics_sync(settings: Settings) -> list[str]:
    return asyncio.run(ensure_topics(settings))

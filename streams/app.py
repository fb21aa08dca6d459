"""The Faust application. Agents and tables are registered on it by the topology modules of later stages."""

from __future__ import annotations

import faust

from streams.settings import Settings


def create_app(settings: Settings) -> faust.App:
    if not settings.kafka_bootstrap_servers:
        raise ValueError("kafka_bootstrap_servers is not set (start one with `ctxbudget kafka up`)")
    return faust.App(
        settings.app_id,
        broker=[f"kafka://{server}" for server in settings.kafka_bootstrap_servers.split(",")],
        datadir=str(settings.resolved_data_dir / "faust"),
        store="memory://",
        topic_partitions=settings.topic_partitions,
        topic_replication_factor=settings.topic_replication_factor,
        # Our own topics are created with explicit configs by streams.topics before the worker starts; Faust still
        # declares its internal ones (table changelogs, the assignor's leader topic).
        topic_allow_declare=True,
        # Faust's 60 s default makes every group join slow on one broker; 10 s still tolerates a GC pause.
        broker_session_timeout=10.0,
        broker_heartbeat_interval=1.0,
        web_enabled=False,
    )

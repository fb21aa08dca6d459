"""A survey reads which offsets of a partition exist, so a jump over missing offsets is told from dropped records."""

from __future__ import annotations

import pytest
from aiokafka import AIOKafkaProducer
from faust.types import TP

from core.settings import Settings
from streams.runtime.intake import survey_offsets
from streams.topic_admin import ensure_topics

pytestmark = pytest.mark.kafka


async def test_a_survey_sees_the_offsets_no_record_holds(settings: Settings) -> None:
    # Transaction markers take offsets no consumer ever sees: holes on a real broker, like those compaction leaves.
    await ensure_topics(settings)
    topic = settings.topic("thread-state")
    producer = AIOKafkaProducer(bootstrap_servers=settings.kafka_bootstrap_servers, transactional_id=topic)
    await producer.start()
    try:
        for batch in range(3):
            async with producer.transaction():
                for record in range(2):
                    await producer.send(topic, f"{batch}-{record}".encode(), key=b"thread-1", partition=0)
    finally:
        await producer.stop()

    tp = TP(topic, 0)
    survey = (await survey_offsets(str(settings.kafka_bootstrap_servers), {tp: (1, 7)}))[tp]
    assert survey.existing == (1, 3, 4, 6, 7)  # 2 and 5 are the first two markers
    assert survey.hole(2, 3) is True
    assert survey.hole(5, 6) is True
    assert survey.hole(2, 4) is False

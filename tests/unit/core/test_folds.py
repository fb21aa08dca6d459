"""The declared topology (core/folds.py): every topic in the catalog, and the chains of processors sharing a key."""

from __future__ import annotations

from core.folds import FOLDS, Processor, chain
from core.topics import (
    CONVERSATION_LINKS,
    CONVERSATION_THREADS,
    DEADLETTER,
    HANDOFF_PACKAGES,
    SNAPSHOTS,
    THREAD_STATE,
    TOPICS,
)


def test_every_declared_topic_is_in_the_catalog_and_every_catalog_topic_is_read() -> None:
    catalog = {spec.name for spec in TOPICS}
    inputs = {topic for fold in FOLDS for topic in fold.inputs}
    outputs = {topic for fold in FOLDS for topic in fold.outputs}
    assert inputs | outputs <= catalog
    assert catalog <= inputs
    assert len({fold.name for fold in FOLDS}) == len(FOLDS)


def test_a_chain_reads_its_steps_inputs_but_those_an_earlier_step_hands_on() -> None:
    first = Processor("first", (SNAPSHOTS, HANDOFF_PACKAGES), (THREAD_STATE, DEADLETTER))
    second = Processor(
        "second", (THREAD_STATE, CONVERSATION_LINKS, HANDOFF_PACKAGES), (CONVERSATION_THREADS, DEADLETTER)
    )
    fold = chain("chained", frozenset({"engine"}), first, second, table="slots")
    assert fold.inputs == (SNAPSHOTS, HANDOFF_PACKAGES, CONVERSATION_LINKS)  # the first step's first input owns it
    assert fold.outputs == (THREAD_STATE, DEADLETTER, CONVERSATION_THREADS)
    assert (fold.handed(second), fold.own(second), fold.own(first)) == (
        (THREAD_STATE,),
        (CONVERSATION_LINKS,),
        (SNAPSHOTS, HANDOFF_PACKAGES),
    )
    alone = fold.alone(second)
    assert (alone.name, alone.inputs, alone.outputs, alone.chain) == ("second", second.inputs, second.outputs, ())

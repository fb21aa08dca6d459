"""What every stateful fold hands the runtime, free of Faust: input messages in, states and records to publish out.

A batch function gets plain messages and a way to load a key's state, and returns the states to write and the
records to publish (`BatchResult`). `fold_records` is the common shape: decode by topic (dead-lettering what fails),
check the key, apply a pure per-record fold. The engine has its own batch function with policies and coalescing.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar

from core.ids import short_text
from core.topics import DEADLETTER, MAX_MESSAGE_BYTES, max_message_bytes
from schemas import DeadLetter, DecodeError, Record
from schemas.codec import encode_record

log = logging.getLogger(__name__)
FOLD_FAILED = "fold_failed"
OUTPUT_TOO_LARGE = "output_too_large"
RECORD_OVERHEAD_BYTES = 1024
"""Room left under a topic's `max.message.bytes` for the record batch's own header and the record's key and framing."""

S = TypeVar("S")
K = TypeVar("K", bytes, str)
R = TypeVar("R")


@dataclass(frozen=True)
class Emit:
    """A record to publish: unprefixed topic name, key, value."""

    topic: str
    key: str
    record: Record


@dataclass(frozen=True)
class InputMessage:
    topic: str
    """Unprefixed topic name."""
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: datetime | None = None
    """The record's time in the log: what its outputs are stamped with, so that a replay stamps them alike."""


@dataclass
class BatchResult(Generic[S]):
    states: dict[str, S] = field(default_factory=dict)
    """Changed states by key: write these to the table."""
    emits: list[Emit] = field(default_factory=list)
    outcomes: Counter[str] = field(default_factory=Counter)
    """What the batch decided besides states and outputs, for metrics: `snapshot_<verdict>`, `level_mismatch`,
    `fold_failed`, `output_too_large`."""


@dataclass(frozen=True)
class Encoded(Generic[S]):
    """A batch's outputs as Kafka takes them: (unprefixed topic, key, value) per output, (key, value, state) per
    changed state (its changelog record)."""

    emits: list[tuple[str, bytes, bytes]]
    states: list[tuple[bytes, bytes, S]]

    @classmethod
    def of(cls, result: BatchResult[S]) -> Encoded[S]:
        return cls(
            [(e.topic, e.key.encode(), encode_record(e.record)) for e in result.emits],
            [(key.encode(), encode_record(state), state) for key, state in result.states.items()],
        )

    def too_large(self) -> str | None:
        """Why Kafka would refuse one of these records (the first found), None when every one fits its topic."""
        records = [(topic, key, value, max_message_bytes(topic)) for topic, key, value in self.emits]
        records += [("state changelog", key, value, MAX_MESSAGE_BYTES) for key, value, _ in self.states]
        for topic, key, value, limit in records:
            if len(value) + RECORD_OVERHEAD_BYTES > limit:
                shown = key.decode(errors="replace")
                return f"its {topic} record for {shown!r} weighs {len(value)} bytes, over the {limit} Kafka takes"
        return None


T = TypeVar("T")


def bounded(
    run: Callable[[list[T], Callable[[str], S | None]], BatchResult[S]],
    items: list[T],
    load: Callable[[str], S | None],
    refuse: Callable[[T, str, BatchResult[S]], None],
) -> tuple[BatchResult[S], Encoded[S]]:
    """`run(items, load)` and its encoding, when every record it publishes fits its topic. Otherwise each item is run
    alone, over the states the ones before it left, and an item whose own outputs do not all fit is `refuse`d (told
    why, and the result to add its dead letter to) instead of applied: Kafka would refuse the batch again on every
    replay, and the partition would never move on. Rare, so the common batch pays one encoding and a length check."""
    result = run(items, load)
    encoded = Encoded.of(result)
    if encoded.too_large() is None:
        return result, encoded
    combined: BatchResult[S] = BatchResult()

    def load_applied(key: str) -> S | None:
        return combined.states[key] if key in combined.states else load(key)

    for item in items:
        one = run([item], load_applied)
        why = Encoded.of(one).too_large()
        if why is not None:
            combined.outcomes[OUTPUT_TOO_LARGE] += 1
            refuse(item, why, combined)
            continue
        combined.states.update(one.states)
        combined.emits.extend(one.emits)
        combined.outcomes.update(one.outcomes)
    return combined, Encoded.of(combined)


class Decoder(Protocol):
    def decode(self, data: bytes | None) -> Any: ...


@dataclass(frozen=True)
class Change(Generic[S]):
    """One record's effect: the key's new state (None: nothing to write) and the records to publish."""

    state: S | None
    emits: list[Emit] = field(default_factory=list)
    dead_letter: tuple[str, str] | None = None
    """(reason, detail) when the record could not do all it should: it goes to the dead-letter topic as received."""


def dead_letter(message: InputMessage, reason: str, detail: str, now: datetime, prefix: str) -> Emit:
    return Emit(
        DEADLETTER,
        (message.key or b"").decode("utf-8", "replace"),
        DeadLetter(
            source_topic=f"{prefix}{message.topic}",
            partition=message.partition,
            offset=message.offset,
            reason=reason,
            detail=detail,
            original_key=message.key,
            original_value=message.value,
            received_at=message.timestamp or now,
        ),
    )


def bounded_batch(
    batch: Callable[[list[InputMessage], Callable[[str], S | None], datetime], BatchResult[S]],
    messages: list[InputMessage],
    load: Callable[[str], S | None],
    now: datetime,
    prefix: str,
) -> tuple[BatchResult[S], Encoded[S]]:
    """A keyed fold's batch, `bounded`: a record whose outputs Kafka would refuse is dead-lettered
    (`output_too_large`) and the rest applied."""
    return bounded(
        lambda items, load_: batch(items, load_, now),
        messages,
        load,
        lambda message, why, result: output_too_large(message, why, result, now, prefix),
    )


def bounded_tick(
    tick: Callable[[Iterable[tuple[str, S]], datetime], BatchResult[S]], states: list[tuple[str, S]], now: datetime
) -> tuple[BatchResult[S], Encoded[S]]:
    """A fold's timer, `bounded`: a state whose timed outputs Kafka would refuse stays as it was (no input to
    dead-letter: it is logged and counted, and tried again at its next deadline)."""

    def refuse(item: tuple[str, S], why: str, result: BatchResult[S]) -> None:
        log.error("timer outputs of %s too large, state left as it was: %s", item[0], why)

    return bounded(lambda items, _: tick(items, now), states, lambda _: None, refuse)


def output_too_large(message: InputMessage, why: str, result: BatchResult[Any], now: datetime, prefix: str) -> None:
    """`message`'s outputs would not fit Kafka's message size: its key keeps the state it had, and the record goes to
    the dead-letter topic whole with why, like a record the fold raised on."""
    log.error("outputs of %s[%d]@%d too large: %s", message.topic, message.partition, message.offset, why)
    result.emits.append(dead_letter(message, OUTPUT_TOO_LARGE, why, now, prefix))


def fold_failure(message: InputMessage, error: Exception, result: BatchResult[Any], now: datetime, prefix: str) -> None:
    """A fold raised on `message`: its key keeps the state it had, the record goes to the dead-letter topic whole (to
    replay once the fold is fixed), and the batch goes on, so one record does not hold its partition and every other
    key behind it."""
    log.exception("fold failed on %s[%d]@%d", message.topic, message.partition, message.offset, exc_info=error)
    result.outcomes[FOLD_FAILED] += 1
    detail = short_text(f"{type(error).__name__}: {error}")
    result.emits.append(dead_letter(message, FOLD_FAILED, detail, now, prefix))


def decode_keyed(
    message: InputMessage, decode: Callable[[bytes | None], R], key_of: Callable[[R], str]
) -> tuple[str, R]:
    """The message's record and its key, `key_of(record)`; a `DecodeError` when it does not decode or is keyed
    otherwise (a record under another key would land in another key's state)."""
    record = decode(message.value)
    key = key_of(record)
    if message.key != key.encode():
        raise DecodeError("key_mismatch", f"key {message.key!r} is not the record's key {key!r}")
    return key, record


def fold_records(
    messages: Iterable[InputMessage],
    load: Callable[[str], S | None],
    decoders: Mapping[str, Decoder],
    key_of: Callable[[Any], str],
    apply: Callable[[S | None, Any, datetime], Change[S]],
    now: datetime,
    prefix: str,
) -> BatchResult[S]:
    """Decode each message with its topic's decoder, check it is keyed by `key_of(record)`, fold it into that key's
    state with the record's time in the log (`now` when unknown): a fold judges by it, not by the clock of the worker
    applying it, so that a replay decides alike. Invalid records, and records the fold raises on, become dead
    letters; the batch goes on."""
    result: BatchResult[S] = BatchResult()
    states: dict[str, S | None] = {}
    for message in messages:
        try:
            key, record = decode_keyed(message, decoders[message.topic].decode, key_of)
        except DecodeError as error:
            result.emits.append(dead_letter(message, error.reason, error.detail, now, prefix))
            continue
        if key not in states:
            states[key] = load(key)
        try:
            change = apply(states[key], record, message.timestamp or now)
        except Exception as error:  # a fold's own fault: the record is kept, see fold_failure
            fold_failure(message, error, result, now, prefix)
            continue
        if change.state is not None:
            states[key] = result.states[key] = change.state
        result.emits.extend(change.emits)
        if change.dead_letter is not None:
            result.emits.append(dead_letter(message, *change.dead_letter, now, prefix))
    return result


class DecodedStates(Generic[K, S]):
    """Per key, the stored bytes last decoded or written and their state: states are immutable, and decoding every
    state on every batch and tick was a fold's largest cost after its batch function."""

    def __init__(self, decode: Callable[[bytes], S]) -> None:
        self.decode = decode
        self._states: dict[K, tuple[bytes, S]] = {}

    def get(self, key: K, raw: bytes) -> S:
        """The state stored as `raw`, decoded only if these very bytes were not decoded or written for `key` last."""
        cached = self._states.get(key)
        if cached is not None and cached[0] is raw:  # the very bytes object: nothing wrote the key since
            return cached[1]
        state = self.decode(raw)
        self._states[key] = (raw, state)
        return state

    def written(self, key: K, raw: bytes, state: S) -> None:
        self._states[key] = (raw, state)

    def clear(self) -> None:
        self._states.clear()

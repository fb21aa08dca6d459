"""A bounded on-disk spool of snapshots waiting for delivery: the reporter loses nothing while the API or Kafka is down.

Format. One append-only log file, `spool.log`, of frames: a header (payload length, CRC-32 of the payload) then the
payload: a kind byte, the record's sequence number, and for a `PUT` the snapshot's JSON (the schemas' codec). A `GONE`
frame ends a record: delivered, or dropped to keep the bound. The pending records are the PUTs without a GONE, in
sequence order.

Durability. `append` returns only after its frames are fsynced. GONE frames are written to the kernel at once but not
fsynced: only a power cut can lose one, and its record is then delivered again, which is harmless (below). Opening
the spool replays the log; a torn frame at the end (a crash in the middle of a write) is cut off, so only a record
whose `append` never returned can be missing. The log is rewritten (temporary file, fsync, atomic rename, fsync of the
directory) when its dead frames outweigh the live ones, so it stays within about twice the bound.

Nothing twice. A record leaves the spool only after the receiver confirmed it. A crash between the confirmation and the
GONE frame sends that record again after the restart: the very same snapshot, with the same `snapshot_id`,
`snapshot_version` and `captured_at`, which the engine drops as not newer (`core.precedence`). That is the
whole "nothing sent twice" guarantee: at-least-once delivery of records that are idempotent at the receiver.

Bounds. At most `max_records` records and `max_bytes` of snapshot JSON. When an append would exceed either, the spool
first drops records superseded by a newer record of the same thread and source (the engine would drop them as not
newer anyway, after the newer one), oldest first, and only then the oldest records of all. Drops are counted by
reason and logged.
"""

from __future__ import annotations

import fcntl
import logging
import os
import struct
import zlib
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from schemas import SourceKind, ThreadContextSnapshot
from schemas.codec import Codec, DecodeError

log = logging.getLogger(__name__)

LOG_NAME = "spool.log"
DEFAULT_MAX_RECORDS = 10_000
DEFAULT_MAX_BYTES = 16 * 1024 * 1024
COMPACT_MIN_DEAD_BYTES = 1024 * 1024
"""Dead frames below this are left in the log; an empty spool is truncated whatever its size."""

_HEADER = struct.Struct(">II")  # payload length, CRC-32 of the payload
_PREFIX = struct.Struct(">cQ")  # kind, sequence number
_PUT = b"P"
_GONE = b"G"
_SNAPSHOTS: Codec[ThreadContextSnapshot] = Codec(ThreadContextSnapshot)

StreamKey = tuple[str, SourceKind]
"""A thread and source: the engine orders snapshots by version within one."""


LOCK_NAME = ".lock"
SPOOL_SLOTS = 16


class SpoolBusy(RuntimeError):
    """Another process holds the spool directory."""


class SpoolCorrupt(RuntimeError):
    """A frame passed its checksum but does not decode: not a torn write, so nothing is thrown away silently."""


@dataclass(frozen=True)
class Spooled:
    seq: int
    snapshot: ThreadContextSnapshot
    size: int
    """Bytes of snapshot JSON: what `max_bytes` counts."""

    @property
    def key(self) -> StreamKey:
        return (self.snapshot.thread_id, self.snapshot.source_kind)


def _frame(kind: bytes, seq: int, body: bytes = b"") -> bytes:
    payload = _PREFIX.pack(kind, seq) + body
    return _HEADER.pack(len(payload), zlib.crc32(payload)) + payload


def read_frames(data: bytes) -> tuple[list[tuple[bytes, int, bytes]], int]:
    """The complete frames of a log as (kind, seq, body), and where the last complete frame ends."""
    frames, at = [], 0
    while at + _HEADER.size <= len(data):
        length, crc = _HEADER.unpack_from(data, at)
        end = at + _HEADER.size + length
        payload = data[at + _HEADER.size : end]
        if end > len(data) or length < _PREFIX.size or zlib.crc32(payload) != crc:
            break
        kind, seq = _PREFIX.unpack_from(payload)
        frames.append((kind, seq, payload[_PREFIX.size :]))
        at = end
    return frames, at


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Spool:
    def __init__(
        self, directory: Path, max_records: int = DEFAULT_MAX_RECORDS, max_bytes: int = DEFAULT_MAX_BYTES
    ) -> None:
        if max_records < 1 or max_bytes < 1:
            raise ValueError("a spool holds at least one record")
        self.directory = directory
        self.max_records = max_records
        self.max_bytes = max_bytes
        self.dropped: Counter[str] = Counter()
        self._path = directory / LOG_NAME
        self._pending: dict[int, Spooled] = {}  # insertion order is sequence order
        self._bytes = 0
        self._dead_bytes = 0
        self._next_seq = 0
        directory.mkdir(parents=True, exist_ok=True)
        self._replay()
        self._rewrite()
        self._file = self._path.open("ab")

    def __len__(self) -> int:
        return len(self._pending)

    def __iter__(self) -> Iterator[Spooled]:
        return iter(list(self._pending.values()))

    @property
    def size_bytes(self) -> int:
        return self._bytes

    def head(self) -> Spooled | None:
        """The oldest pending record: the next to deliver."""
        return next(iter(self._pending.values()), None)

    def append(self, snapshots: Sequence[ThreadContextSnapshot]) -> None:
        """Store snapshots durably (fsynced when this returns), making room within the bounds first."""
        frames = bytearray()
        for snapshot in snapshots:
            body = _SNAPSHOTS.encode(snapshot)
            record = Spooled(self._next_seq, snapshot, len(body))
            self._next_seq += 1
            frames += _frame(_PUT, record.seq, body)
            self._add(record)
            for victim, reason in self._evictions():
                frames += self._forget(victim, reason)
        self._file.write(frames)
        self._file.flush()
        os.fsync(self._file.fileno())

    def remove(self, seq: int) -> None:
        """The receiver confirmed the record: it leaves the spool (a record already dropped is no error)."""
        if seq not in self._pending:
            return
        self._file.write(self._forget(self._pending[seq]))
        self._file.flush()  # to the kernel: survives a crash of the process; a power cut only means a harmless resend
        if not self._pending or self._dead_bytes > max(self._bytes, COMPACT_MIN_DEAD_BYTES):
            self._file.close()
            self._rewrite()
            self._file = self._path.open("ab")

    def close(self) -> None:
        self._file.close()

    def _add(self, record: Spooled) -> None:
        self._pending[record.seq] = record
        self._bytes += record.size

    def _forget(self, record: Spooled, reason: str | None = None) -> bytes:
        del self._pending[record.seq]
        self._bytes -= record.size
        frame = _frame(_GONE, record.seq)
        self._dead_bytes += record.size + len(frame)
        if reason is not None:
            self.dropped[reason] += 1
            log.warning(
                "spool: dropped a snapshot of thread %r (version %d, %s); dropped so far: %s",
                record.snapshot.thread_id,
                record.snapshot.snapshot_version,
                reason,
                dict(self.dropped),
            )
        return frame

    def _full(self) -> bool:
        return len(self._pending) > self.max_records or self._bytes > self.max_bytes

    def _evictions(self) -> Iterator[tuple[Spooled, str]]:
        """What to drop until the spool is within its bounds: superseded records first, then the oldest."""
        if not self._full():
            return
        newest = {record.key: record.seq for record in self._pending.values()}
        for record in list(self._pending.values()):
            if newest[record.key] != record.seq:
                yield record, "superseded"
                if not self._full():
                    return
        while self._full() and len(self._pending) > 1:
            yield next(iter(self._pending.values())), "overflow"

    def _replay(self) -> None:
        if not self._path.exists():
            return
        data = self._path.read_bytes()
        frames, end = read_frames(data)
        if end < len(data):
            log.warning("spool: cut off %d bytes of a torn write at the end of %s", len(data) - end, self._path)
        for kind, seq, body in frames:
            self._next_seq = max(self._next_seq, seq + 1)
            if kind == _PUT:
                try:
                    self._add(Spooled(seq, _SNAPSHOTS.decode(body), len(body)))
                except DecodeError as error:
                    raise SpoolCorrupt(f"{self._path}: record {seq} does not decode: {error}") from error
            elif kind == _GONE and seq in self._pending:
                self._bytes -= self._pending.pop(seq).size
            elif kind != _GONE:
                raise SpoolCorrupt(f"{self._path}: record {seq} has an unknown kind {kind!r}")

    def _rewrite(self) -> None:
        """Replace the log by the pending records alone, atomically; sequence numbers are kept."""
        temporary = self._path.with_suffix(".tmp")
        with temporary.open("wb") as out:
            for record in self._pending.values():
                out.write(_frame(_PUT, record.seq, _SNAPSHOTS.encode(record.snapshot)))
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, self._path)
        _fsync_directory(self.directory)
        self._dead_bytes = 0


def lock_directory(directory: Path) -> IO[bytes]:
    """An exclusive lock on a spool directory, held until the returned file is closed (or the process ends): two
    processes rewriting one spool's files would lose records. SpoolBusy when another process holds it."""
    directory.mkdir(parents=True, exist_ok=True)
    lock = (directory / LOCK_NAME).open("ab")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        raise SpoolBusy(f"another ctxbudget process uses the spool {directory}") from None
    return lock


def claim_spool(base: Path, slots: int = SPOOL_SLOTS) -> tuple[Path, IO[bytes]]:
    """The first of `base`, `base-2`, ... `base-<slots>` that no other process holds, locked. A second reporter on
    one machine (a Codex app-server thread each, say) gets a spool of its own; a restarted one takes the first free
    slot and delivers what it holds (records carry their own identity, and the receiver drops repeats)."""
    for slot in range(1, slots + 1):
        directory = base if slot == 1 else base.with_name(f"{base.name}-{slot}")
        try:
            return directory, lock_directory(directory)
        except SpoolBusy:
            continue
    raise SpoolBusy(f"{slots} reporters already use the spools {base}, {base.name}-2, ...: give --spool-dir")

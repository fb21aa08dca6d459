"""Which files in watched directories changed, told by the kernel (Linux inotify, through libc: no dependency).

The tailer otherwise lists every directory and stats every transcript each poll, hundreds of files of which a few
moved: that sweep was the reporter's floor, idle or busy. `InotifyWatch.open()` is None where inotify is not available
(another system, an old libc, no instance left); the tailer then sweeps as before. A watch sees only what this
machine's kernel writes (not a network filesystem's other clients), and its queue may overflow: the tailer sweeps
after an overflow and on a slow period anyway.
"""

from __future__ import annotations

import ctypes
import logging
import os
import struct
import sys
import weakref
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

IN_MODIFY = 0x00000002
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000
IN_ISDIR = 0x40000000
WATCHED = IN_MODIFY | IN_MOVED_TO | IN_CREATE
"""A line appended, a file renamed into place or created, a directory made (its files are then swept once)."""
_EVENT = struct.Struct("iIII")  # struct inotify_event: wd, mask, cookie, len; then len bytes of name
_READ_BYTES = 1 << 16


@dataclass
class Changes:
    files: set[str] = field(default_factory=set)
    """Paths of files written, created or renamed into a watched directory since the last read."""
    directories: list[str] = field(default_factory=list)
    """Directories made in a watched one (not watched yet: sweep them, which watches them)."""
    overflow: bool = False
    """The kernel dropped events: only a sweep knows what changed."""


class InotifyWatch:
    def __init__(self, libc: ctypes.CDLL, fd: int) -> None:
        self._libc = libc
        self._fd = fd
        self._directories: dict[int, str] = {}
        weakref.finalize(self, os.close, fd)

    @classmethod
    def open(cls) -> InotifyWatch | None:
        if not sys.platform.startswith("linux"):
            return None
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        except (OSError, AttributeError) as error:
            log.info("file watch: inotify unavailable (%s); polls list the directories", error)
            return None
        if fd < 0:
            log.info(
                "file watch: inotify_init1 failed (%s); polls list the directories", os.strerror(ctypes.get_errno())
            )
            return None
        return cls(libc, fd)

    def add(self, directory: str) -> None:
        """Watch a directory (again is harmless: the kernel keeps one watch per directory); raises OSError when the
        kernel refuses (ENOENT: it is gone; ENOSPC: the user's watches are used up)."""
        wd = self._libc.inotify_add_watch(self._fd, os.fsencode(directory), WATCHED)
        if wd < 0:
            number = ctypes.get_errno()
            raise OSError(number, os.strerror(number), directory)
        self._directories[wd] = directory

    def read(self) -> Changes:
        """What the kernel queued since the last read (nothing blocks)."""
        changes = Changes()
        while True:
            try:
                data = os.read(self._fd, _READ_BYTES)
            except BlockingIOError:
                return changes
            at = 0
            while at < len(data):
                wd, mask, _cookie, length = _EVENT.unpack_from(data, at)
                name = data[at + _EVENT.size : at + _EVENT.size + length].rstrip(b"\0")
                at += _EVENT.size + length
                if mask & IN_Q_OVERFLOW:
                    changes.overflow = True
                elif mask & IN_IGNORED:  # the directory was removed
                    self._directories.pop(wd, None)
                elif (directory := self._directories.get(wd)) is not None and name:
                    path = os.path.join(directory, os.fsdecode(name))
                    if mask & IN_ISDIR:
                        changes.directories.append(path)
                    else:
                        changes.files.add(path)

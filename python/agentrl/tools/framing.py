"""Length-prefixed frames over pipes: how agentrl talks to the processes it starts.

The tool workers (`agentrl.tools.workers`, pickles) and the ``python`` tool's sandbox
(`agentrl.tools.python_sandbox` and its interpreter `sandbox_boot`, JSON) both send a
frame as an 8-byte little-endian length, then that many bytes; what the bytes hold is the
caller's. A reader may give a deadline (``time.monotonic()`` seconds): past it, with the
frame not yet whole, :class:`FrameTimeout`; a pipe that ends first is an ``EOFError``.

Standard library only: the sandbox's interpreter loads this file by its path before it
shuts itself off from the rest of the file system (it cannot import agentrl).
"""

from __future__ import annotations

import os
import select
import struct
import time

HEADER = struct.Struct("<Q")


class FrameTimeout(TimeoutError):
    """The deadline passed before a whole frame arrived."""


def write_frame(fd: int, data: bytes) -> None:
    """Send ``data`` as one frame on the file descriptor ``fd`` (all of it, or OSError)."""
    view = memoryview(HEADER.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view) :]


def read_exact(fd: int, n: int, deadline: float | None = None) -> bytes:
    """``n`` bytes from ``fd``: EOFError when the pipe ends first, :class:`FrameTimeout`
    when ``deadline`` passes first (None: wait as long as it takes)."""
    parts, left = [], n
    while left:
        if deadline is not None:
            wait = deadline - time.monotonic()
            if wait <= 0 or not select.select([fd], [], [], wait)[0]:
                raise FrameTimeout(f"no whole frame before the deadline ({left} bytes missing)")
        chunk = os.read(fd, left)
        if not chunk:
            raise EOFError("the stream ended")
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def read_frame(fd: int, deadline: float | None = None, limit: int | None = None) -> bytes:
    """The bytes of the next frame on ``fd`` (see :func:`read_exact` for the deadline); a
    frame announcing more than ``limit`` bytes is a ValueError, its body left unread."""
    (size,) = HEADER.unpack(read_exact(fd, HEADER.size, deadline))
    if limit is not None and size > limit:
        raise ValueError(f"a frame of {size} bytes, more than the {limit} expected")
    return read_exact(fd, size, deadline)


__all__ = ["HEADER", "FrameTimeout", "read_exact", "read_frame", "write_frame"]

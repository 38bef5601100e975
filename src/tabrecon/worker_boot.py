"""Loaded into the fork server that starts worker processes (and so into every worker it forks):
a worker whose pool is gone before it finished starting ends without a traceback.

When a run is interrupted while its pool is still starting workers, the pool's semaphores are
unlinked before a late worker unpickles them; Python's fork server then prints that worker's
``FileNotFoundError`` (from ``SemLock._rebuild``) to the terminal the user interrupted, after
tabrecon's own one-line message (seen twice in 11 loaded interrupts). Nothing is lost: the worker
had not started any unit. This hook keeps that one case quiet and leaves every other exception to
the default hook. Imports nothing beyond the standard library: the fork server must stay clean
(see :func:`tabrecon.interrupts._context`).
"""

from __future__ import annotations

import sys
import traceback
from types import TracebackType

_DEFAULT = sys.excepthook


def _pool_gone(exc: BaseException, tb: TracebackType | None) -> bool:
    """True for the late worker's error: a missing semaphore while unpickling its pool's lock."""
    if not isinstance(exc, FileNotFoundError):
        return False
    frames = traceback.extract_tb(tb)
    return (
        bool(frames)
        and frames[-1].name == "__setstate__"
        and frames[-1].filename.endswith("synchronize.py")
    )


def _hook(kind: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
    if _pool_gone(exc, tb):
        return
    _DEFAULT(kind, exc, tb)


sys.excepthook = _hook

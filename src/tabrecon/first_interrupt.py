"""The command line's SIGINT and SIGTERM handler, alone in a module with no imports but
:mod:`signal` and :mod:`sys`, so that the entry point installs it before anything heavy is
imported (:mod:`tabrecon.entry`) and :func:`tabrecon.interrupts.install` installs the same one.

The handler raises :class:`KeyboardInterrupt` and also records that an interrupt arrived. Python
swallows an exception raised inside a weak-reference callback or a finaliser (it prints
"Exception ignored in ..." and goes on): an interrupt landing there was lost, and the run went on
to its end and exited 0 (seen once in 20 loaded runs, the first and only Ctrl-C landing in the
import system's ``_get_module_lock`` callback). The record survives the swallowed exception, so
the runner raises it again at its next check (:func:`tabrecon.interrupts.check`) and the command
line never reports success after an interrupt (:func:`unanswered`)."""

from __future__ import annotations

import signal
import sys
from typing import Any

_arrived = [False]


def interrupt_once(signum: int, frame: object) -> None:
    """The command line's SIGINT and SIGTERM handler: the first raises KeyboardInterrupt, and the
    run is then on its way out with exit code 130, so any later one is ignored. A second Ctrl-C
    used to land wherever Python was at that moment, such as a clean-up the run shields or a
    callback of the import system, which then printed "Exception ignored in ... KeyboardInterrupt"
    and a traceback (once in 20 loaded runs, a second Ctrl-C 0.02-0.3 s after the first)."""
    record()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)
    raise KeyboardInterrupt


def record() -> None:
    """An interrupt arrived (a handler that does not raise at once, such as a shielded
    clean-up's, records it so)."""
    _arrived[0] = True


def unanswered() -> bool:
    """Whether an interrupt arrived that the command line has not answered yet (it may have been
    swallowed where Python ignores exceptions)."""
    return _arrived[0]


def answered() -> None:
    """The interrupt was answered (the run stopped and said so): forget it."""
    _arrived[0] = False


def _quiet_interrupts(unraisable: Any) -> None:
    # an interrupt swallowed in a callback or finaliser: recorded by the handler and raised again
    # at the runner's next check, so no "Exception ignored" traceback for it
    if isinstance(unraisable.exc_value, KeyboardInterrupt):
        return
    sys.__unraisablehook__(unraisable)


def install_handler() -> None:
    """SIGINT and SIGTERM call :func:`interrupt_once`; an interrupt Python swallows prints
    nothing (it is raised again where the runner checks). Only from the main thread."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, interrupt_once)
    sys.unraisablehook = _quiet_interrupts

"""The command line's SIGINT and SIGTERM handler, alone in a module with no imports but
:mod:`signal`, so that the entry point installs it before anything heavy is imported
(:mod:`tabrecon.entry`) and :func:`tabrecon.interrupts.install` installs the same one."""

from __future__ import annotations

import signal


def interrupt_once(signum: int, frame: object) -> None:
    """The command line's SIGINT and SIGTERM handler: the first raises KeyboardInterrupt, and the
    run is then on its way out with exit code 130, so any later one is ignored. A second Ctrl-C
    used to land wherever Python was at that moment, such as a clean-up the run shields or a
    callback of the import system, which then printed "Exception ignored in ... KeyboardInterrupt"
    and a traceback (once in 20 loaded runs, a second Ctrl-C 0.02-0.3 s after the first)."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)
    raise KeyboardInterrupt

"""The ``tabrecon`` command's entry point: interrupts are handled before anything heavy is
imported, so a Ctrl-C or SIGTERM while the program starts (a second or more on a loaded machine,
most of it importing the numerical libraries) ends it with the contract's exit code 130 and one
line, never a traceback; then :func:`tabrecon.cli.app.main` runs."""

from __future__ import annotations

import signal
import sys

#: the contract's exit code of an interrupted run (:func:`tabrecon.cli.app.run`)
EXIT_INTERRUPTED = 130


def interrupt_once(signum: int, frame: object) -> None:
    """The command line's SIGINT and SIGTERM handler: the first raises KeyboardInterrupt, and the
    run is then on its way out with exit code 130, so any later one is ignored. A second Ctrl-C
    used to land wherever Python was at that moment, such as a clean-up the run shields or a
    callback of the import system, which then printed "Exception ignored in ... KeyboardInterrupt"
    and a traceback (once in 20 loaded runs, a second Ctrl-C 0.02-0.3 s after the first)."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)
    raise KeyboardInterrupt


def main() -> None:
    """Run the command line; an interrupt before it is ready exits 130 with one line."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, interrupt_once)
    try:
        from .cli.app import main as cli_main
    except KeyboardInterrupt:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_IGN)
        sys.stderr.write("interrupted while starting; nothing was being kept at that moment\n")
        sys.exit(EXIT_INTERRUPTED)
    cli_main()

"""The ``tabrecon`` command's entry point: interrupts are handled before anything heavy is
imported, so a Ctrl-C or SIGTERM while the program starts (a second or more on a loaded machine,
most of it importing the numerical libraries) ends it with the contract's exit code 130 and one
line, never a traceback; then :func:`tabrecon.cli.app.main` runs."""

from __future__ import annotations

import signal
import sys

from .first_interrupt import install_handler

#: the contract's exit code of an interrupted run (:func:`tabrecon.cli.app.run`)
EXIT_INTERRUPTED = 130


def main() -> None:
    """Run the command line; an interrupt before it is ready exits 130 with one line."""
    install_handler()
    try:
        from .cli.app import main as cli_main
    except KeyboardInterrupt:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_IGN)
        sys.stderr.write("interrupted while starting; nothing was being kept at that moment\n")
        sys.exit(EXIT_INTERRUPTED)
    cli_main()

"""The command line run inside the test's process: what a subprocess gives (exit code, standard
output and error) without starting Python and importing the numerical libraries again (1.2-2.5 s
a command on the CI machine, most of the contract test's five minutes).

The few behaviours only a fresh process shows (start-up with ``click`` hidden, an interrupt, a
network failure's exit code) stay in subprocesses; see ``tests/test_cli_contract.py``.
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import warnings
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

#: the ``tabrecon`` command as a new process runs it
EXE = [sys.executable, "-c", "from tabrecon.entry import main; main()"]


def _show(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: object = None,
    line: str | None = None,
) -> None:
    sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))


def run_cli(
    argv: list[str], cwd: Path | str | None = None, width: int = 200
) -> subprocess.CompletedProcess[str]:
    """Run ``tabrecon ARGV`` in this process, in ``cwd``, and return what a subprocess would:
    its exit code and what it printed (consoles ``width`` columns wide, as ``COLUMNS`` sets a
    subprocess's). Signal handlers, warning filters and the working folder are put back after.

    >>> r = run_cli(["tables", "describe", "P0120003"])
    >>> r.returncode, "male, age 0-4" in r.stdout
    (0, True)
    """
    from tabrecon.cli import terminal
    from tabrecon.cli.app import run

    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    here = Path.cwd()
    out, err = io.StringIO(), io.StringIO()
    widths = terminal.console.width, terminal.err.width
    columns = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(width)  # read by the usage boxes typer makes for each error
    formatwarning = warnings.formatwarning
    try:
        terminal.console.width = terminal.err.width = width
        if cwd is not None:
            os.chdir(cwd)
        with warnings.catch_warnings(), redirect_stdout(out), redirect_stderr(err):
            warnings.showwarning = _show  # printed, as a process does (pytest would keep them)
            code = run(list(argv))
    finally:
        os.chdir(here)
        terminal.console.width, terminal.err.width = widths
        if columns is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = columns
        warnings.formatwarning = formatwarning
        for s, h in handlers.items():
            signal.signal(s, h)
    return subprocess.CompletedProcess(["tabrecon", *argv], code, out.getvalue(), err.getvalue())

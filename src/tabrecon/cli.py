"""Command-line interface: a thin layer over the Python API. Each command parses its options
(refusing bad values before any work), makes one call and prints; the library writes the files.
Exit codes are the contract of :func:`run`."""

from __future__ import annotations

import os
import sys
import warnings

import typer
from rich.markup import escape

from . import __version__
from .commands import attack, audit, defend, lab, publish
from .errors import TabreconError
from .terminal import console, err

app = typer.Typer(
    name="tabrecon",
    help="What published statistical tables give away about the people behind them.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
for _stage in (publish, attack, audit, defend):  # the commands in pipeline order
    app.registered_commands += _stage.app.registered_commands
app.add_typer(publish.tables_app, name="tables")
app.add_typer(lab.dn_app, name="dn")


@app.command()
def version() -> None:
    """Print the version."""
    console.print(__version__)


EXIT_OK, EXIT_FAILED_UNITS, EXIT_BAD_INPUT, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 1, 2, 70, 130
_RESUME_HINT = {
    "": "rerun the same command to resume, or add --fresh to start over",
    "audit": "rerun with --resume to go on from there",
    "demo": "the demo starts afresh when rerun",
}


def run(argv: list[str] | None = None) -> int:
    """Run the CLI and return its exit code (the contract in the README):

    0 success; 1 the run finished but some unit failed or a check found violations (the others
    are written); 2 bad input or usage (one line naming the file, line, column, cell, block or
    option); 130 interrupted (finished units kept); 70 an internal error (a bug; the traceback is
    saved and its path printed).
    """
    from .interrupts import Interrupted, install

    install()
    warnings.simplefilter("default")
    warnings.formatwarning = lambda msg, cat, *a, **k: f"warning: {msg}\n"
    try:
        # standalone mode: typer prints usage errors (exit 2) and turns typer.Exit(n) into exit n
        app(args=argv, prog_name="tabrecon")
    except SystemExit as exc:
        code = exc.code
        if code is None:
            return EXIT_OK
        if not isinstance(code, int):
            err.print(escape(str(code)), highlight=False)
            return EXIT_FAILED_UNITS
        if code == EXIT_INTERRUPTED:  # an interrupt outside any unit of work
            err.print("interrupted; nothing was being kept at that moment", highlight=False)
        return code
    except Interrupted as exc:
        err.print(
            f"{escape(str(exc))}; {_RESUME_HINT.get(_command(argv), _RESUME_HINT[''])}",
            highlight=False,
        )
        return EXIT_INTERRUPTED
    except TabreconError as exc:
        err.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False)
        return EXIT_BAD_INPUT
    except OSError as exc:  # an output path that is a directory, under a file, read-only, full
        where = exc.filename if exc.filename is not None else ""
        what = exc.strerror or str(exc)
        said = f"{where}: {what}" if where else what
        err.print(f"[red]error:[/red] {escape(said)}", highlight=False)
        return EXIT_BAD_INPUT
    except Exception:  # a bug: say so in one line, keep the traceback for the report
        return _internal_error()
    return EXIT_OK


def _internal_error() -> int:
    import tempfile
    import traceback

    fd, path = tempfile.mkstemp(prefix="tabrecon-traceback-", suffix=".txt")
    with os.fdopen(fd, "w") as fh:
        fh.write(f"tabrecon {__version__}, argv {sys.argv!r}\n")
        traceback.print_exc(file=fh)
    kind, value = sys.exc_info()[:2]
    name = kind.__name__ if kind is not None else "error"
    err.print(
        f"[red]internal error[/red] ({escape(f'{name}: {value}')}); this is a bug in tabrecon, "
        f"please report it with the traceback saved in {path}",
        highlight=False,
    )
    return EXIT_INTERNAL


def _command(argv: list[str] | None) -> str:
    args = sys.argv[1:] if argv is None else argv
    return next((a for a in args if not a.startswith("-")), "")


def main() -> None:
    """Entry point of the ``tabrecon`` command: exit with :func:`run`'s code."""
    import signal

    try:
        code = run()
    except KeyboardInterrupt:  # a second Ctrl-C while the first one was being reported
        code = EXIT_INTERRUPTED
    while True:  # the outcome is known: exit without interruption
        try:
            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, signal.SIG_IGN)
            break
        except KeyboardInterrupt:  # one more Ctrl-C landed before they were ignored
            continue
    sys.exit(code)


if __name__ == "__main__":
    main()

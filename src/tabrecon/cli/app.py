"""Command-line interface: a thin layer over the Python API. Each command parses its options
(refusing bad values before any work), makes one call and prints; the library writes the files.
Exit codes are the contract of :func:`run`."""

from __future__ import annotations

import functools
import inspect
import os
import sys
import typing
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from .. import __version__
from ..errors import NetworkError, TabreconError
from ..io import Reads, Writes, clash, protecting, unwritable
from .commands import attack, audit, claims, defend, lab, publish
from .terminal import console, err

app = typer.Typer(
    name="tabrecon",
    help="What published statistical tables give away about the people behind them.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    if value:
        console.print(f"tabrecon {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: typing.Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_print_version,
            is_eager=True,
            help="Print tabrecon's version and exit.",
        ),
    ] = False,
) -> None:
    """What published statistical tables give away about the people behind them."""


for _stage in (publish, attack, claims, audit, defend):  # the commands in pipeline order
    app.registered_commands += _stage.app.registered_commands
app.add_typer(publish.tables_app, name="tables")
app.add_typer(lab.dn_app, name="dn")


def _option_name(name: str, meta: tuple) -> str:
    """How the user wrote the parameter: its long option (``--out``) or its argument's name."""
    for m in meta:
        if isinstance(m, typer.models.OptionInfo):
            decls = [m.default] if isinstance(m.default, str) else []
            decls += list(m.param_decls or ())
            return next((d for d in decls if d.startswith("--")), f"--{name.replace('_', '-')}")
        if isinstance(m, typer.models.ArgumentInfo):
            return name.upper()
    return f"--{name.replace('_', '-')}"


def _say_resumed(text: str) -> None:
    err.print(f"[dim]resumed: {escape(text)}[/dim]", highlight=False)


def _guarded(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` (a command) that first refuses outputs which would replace or clear an input or
    each other (exit 2, naming both; :func:`tabrecon.io.clash`), then runs with its inputs
    protected from every write (:func:`tabrecon.io.protecting`) and what a resumed run keeps
    printed (:func:`tabrecon.runner.notices`). Outputs are the parameters
    marked :class:`~tabrecon.io.Writes`; inputs every other path, and text marked
    :class:`~tabrecon.io.Reads` that names an existing file."""
    sig = inspect.signature(fn)

    @functools.cache
    def roles() -> list[tuple[str, str, Writes | None]]:
        """(parameter, option, Writes or None) of every path parameter: worked out when the
        command runs, not when the program starts (every command's hints cost ~80 ms)."""
        hints = typing.get_type_hints(fn, include_extras=True)
        out = []
        for name in sig.parameters:
            hint = hints.get(name)
            meta = getattr(hint, "__metadata__", ())
            base = typing.get_args(hint)[0] if meta else hint
            writes = next((m for m in meta if isinstance(m, Writes)), None)
            is_path = Path in (base, *typing.get_args(base))
            if writes is not None or is_path or any(isinstance(m, Reads) for m in meta):
                out.append((name, _option_name(name, meta), writes))
        return out

    @functools.wraps(fn)
    def run_command(*args: Any, **kwargs: Any) -> Any:
        given = sig.bind(*args, **kwargs).arguments
        inputs: list[tuple[str, Path]] = []
        outputs: list[tuple[str, Path, bool]] = []
        for name, option, writes in roles():
            value = given.get(name, sig.parameters[name].default)
            if value is None or value is inspect.Parameter.empty:
                continue
            if writes is not None:
                outputs += [(option, p, folder) for p, folder in writes.targets(Path(value))]
            elif isinstance(value, Path) or Path(str(value)).exists():
                inputs.append((option, Path(value)))
        if (problem := clash(inputs, outputs) or unwritable(outputs)) is not None:
            raise TabreconError(problem)
        from ..runner import notices

        with protecting(p for _, p in inputs), notices(_say_resumed):
            return fn(*args, **kwargs)

    return run_command


def _terminal(doc: str) -> str:
    """A command's docstring as the terminal shows it: reST literals (````--schema````) plain."""
    return doc.replace("``", "")


for _typer in (app, publish.tables_app, lab.dn_app):
    for _info in _typer.registered_commands:
        if _info.callback is not None:
            _doc = _terminal(inspect.getdoc(_info.callback) or "")
            _info.help = _info.help or _doc
            # the command list shows its first paragraph as written: lines joined here
            _info.short_help = _info.short_help or " ".join(_doc.split("\n\n")[0].split())
            _info.callback = _guarded(_info.callback)


@app.command()
def version() -> None:
    """Print the version."""
    console.print(__version__)


EXIT_OK, EXIT_FAILED_UNITS, EXIT_BAD_INPUT, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 1, 2, 70, 130
EXIT_NETWORK = 75  # sysexits' EX_TEMPFAIL: a server unreachable or failing; try again later
_RESUME_HINT = {
    "": "rerun the same command to resume, or add --fresh to start over",
    "audit": "rerun with --resume to go on from there",
    "demo": "the demo starts afresh when rerun",
}


def run(argv: list[str] | None = None) -> int:
    """Run the CLI and return its exit code (the contract in the README):

    0 success; 1 the run finished but some unit failed or a check found violations (the others
    are written); 2 bad input or usage (one line naming the file, line, column, cell, block or
    option); 75 a network failure (a server unreachable or failing after retries: not the
    input's fault; rerun later to resume); 130 interrupted (finished units kept); 70 an internal
    error (a bug; the traceback is saved and its path printed).
    """
    from ..first_interrupt import answered, unanswered
    from ..interrupts import install

    install()
    code = _run_app(argv)
    if code == EXIT_INTERRUPTED:
        answered()
    elif code == EXIT_OK and unanswered():  # swallowed where Python ignores exceptions, and
        # raised again nowhere: the run ended before any check, with everything written
        err.print("interrupted as the run ended; every output had been written", highlight=False)
        answered()
        code = EXIT_INTERRUPTED
    return code


@functools.cache
def _command_tree() -> Any:
    """The app as typer builds it, its flags shown without a value placeholder (typer writes
    ``--fresh <bool>``, as if the flag took a value)."""

    def quiet(p: Any) -> Any:
        if p is not None and getattr(p, "is_flag", False) and p.metavar is None:
            p.metavar = ""
        return p

    def quiet_flags(cmd: Any) -> None:
        for p in getattr(cmd, "params", ()):
            quiet(p)
        made = cmd.get_help_option  # --help is made per context
        cmd.get_help_option = lambda ctx, made=made: quiet(made(ctx))
        for sub in getattr(cmd, "commands", {}).values():
            quiet_flags(sub)

    tree = typer.main.get_command(app)
    quiet_flags(tree)
    return tree


def _run_app(argv: list[str] | None) -> int:
    from ..interrupts import Interrupted, interrupted_within, shielded

    warnings.simplefilter("default")
    warnings.formatwarning = lambda msg, cat, *a, **k: f"warning: {msg}\n"
    try:
        # standalone mode: typer prints usage errors (exit 2) and turns typer.Exit(n) into exit n
        _command_tree()(args=argv, prog_name="tabrecon")
    except SystemExit as exc:
        code = exc.code
        if code is None:
            return EXIT_OK
        if not isinstance(code, int):
            err.print(escape(str(code)), highlight=False)
            return EXIT_FAILED_UNITS
        if code == EXIT_INTERRUPTED:  # an interrupt outside run_units (typer's Exit(130))
            _say_interrupted(argv)
        return code
    except Interrupted as exc:
        with shielded():  # a second Ctrl-C must not cut the report short
            err.print(
                f"{escape(str(exc))}; {escape(_resume_hint(argv))}",
                highlight=False,
            )
        return EXIT_INTERRUPTED
    except KeyboardInterrupt:  # outside run_units and outside typer's own handling
        _say_interrupted(argv)
        return EXIT_INTERRUPTED
    except NetworkError as exc:
        err.print(f"[red]network failure:[/red] {escape(str(exc))}", highlight=False)
        return EXIT_NETWORK
    except TabreconError as exc:
        err.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False)
        return EXIT_BAD_INPUT
    except OSError as exc:  # an output path that is a directory, under a file, read-only, full
        where = exc.filename if exc.filename is not None else ""
        what = exc.strerror or str(exc)
        if isinstance(exc, FileExistsError | NotADirectoryError) and where:
            # an output inside a file (--out small.csv/o.parquet): its folder cannot be made
            what = "a file is where the output's folder would be (is a path inside a file?)"
        said = f"{where}: {what}" if where else what
        err.print(f"[red]error:[/red] {escape(said)}", highlight=False)
        return EXIT_BAD_INPUT
    except Exception as exc:  # a bug: say so in one line, keep the traceback for the report
        if interrupted_within(exc):  # a Ctrl-C while an extension was imported (seen once in 20)
            _say_interrupted(argv)
            return EXIT_INTERRUPTED
        return _internal_error()
    return EXIT_OK


def _say_interrupted(argv: list[str] | None) -> None:
    """An interrupt outside run_units: what the run declared it keeps (a sweep's rows, a
    download's tracts: :func:`tabrecon.interrupts.keeps`), read back from disk."""
    from ..interrupts import kept_now

    kept = kept_now()
    text = (
        f"{kept}; {_resume_hint(argv)}"
        if kept is not None
        else "interrupted; nothing was being kept at that moment"
    )
    err.print(escape(text), highlight=False)


def _resume_hint(argv: list[str] | None) -> str:
    """How to go on after an interrupt: an audit's command itself with ``--resume``."""
    import shlex

    args = list(sys.argv[1:] if argv is None else argv)
    if _command(argv) == "audit":
        again = args if "--resume" in args else [*args, "--resume"]
        return f"resume with: tabrecon {shlex.join(again)}"
    return _RESUME_HINT.get(_command(argv), _RESUME_HINT[""])


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
    except KeyboardInterrupt:  # before run() was ready, or a second Ctrl-C while reporting one
        code = EXIT_INTERRUPTED
        try:
            err.print("interrupted; nothing was being kept at that moment", highlight=False)
        except KeyboardInterrupt:
            pass
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

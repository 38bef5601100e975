"""Write docs/commands.md from the command line's own definitions (every command, argument and
option with its help and default), so the page cannot drift from the code; a test checks it is
current. Run: python scripts/gen_commands_doc.py"""

from __future__ import annotations

import inspect
import sys
import typing
from pathlib import Path

from rich.text import Text

from tabrecon.cli.app import app

PIPE = "\\|"
OUT = Path(__file__).resolve().parent.parent / "docs" / "commands.md"


def _shown(text: str) -> str:
    """The help as the terminal shows it: rich markup (``[i]B[/i]``, ``\\[``) rendered."""
    return Text.from_markup(text).plain


def _names(name: str, info: typing.Any) -> str:
    decls = [d for d in (getattr(info, "param_decls", None) or ()) if isinstance(d, str)]
    default = getattr(info, "default", None)
    if isinstance(default, str) and default.startswith("-"):
        decls = [default, *decls]
    if type(info).__name__ == "ArgumentInfo":
        return name.upper()
    long = [d for d in decls if d.startswith("--")]
    short = [d for d in decls if d.startswith("-") and not d.startswith("--")]
    return ", ".join((long or [f"--{name.replace('_', '-')}"]) + short)


def _command(prefix: str, name: str | None, fn: typing.Any) -> list[str]:
    cmd = name or fn.__name__.replace("_", "-")
    doc = inspect.getdoc(fn) or ""
    lines = [f"### `tabrecon {prefix}{cmd}`", "", " ".join(doc.split("\n\n")[0].split()), ""]
    hints = typing.get_type_hints(fn, include_extras=True)
    sig = inspect.signature(fn)
    rows = []
    for pname, p in sig.parameters.items():
        info = next(iter(getattr(hints.get(pname), "__metadata__", ())), None)
        default = "" if p.default is inspect.Parameter.empty else repr(p.default)
        default = (
            default.replace("PosixPath(", "").rstrip(")") if "PosixPath" in default else default
        )
        help_ = _shown(getattr(info, "help", None) or "").replace("|", PIPE)
        rows.append(f"| `{_names(pname, info)}` | {help_} | {default.replace('|', PIPE)} |")
    if rows:
        lines += ["| argument or option | meaning | default |", "|---|---|---|", *rows, ""]
    return lines


def render() -> str:
    out = [
        "# Commands",
        "",
        "Generated from the command line's definitions by `scripts/gen_commands_doc.py`. Every "
        "command exits 0 on success, 1 when the run finished but a unit failed, 2 on bad input "
        "(one line naming the file, line, cell, block or option), 75 on a network failure "
        "(download), 130 when interrupted.",
        "",
    ]
    for c in app.registered_commands:
        out += _command("", c.name, c.callback)
    for g in app.registered_groups:
        out += [f"## `tabrecon {g.name}`", ""]
        for c in g.typer_instance.registered_commands:
            out += _command(f"{g.name} ", c.name, c.callback)
    return "\n".join(out).rstrip("\n") + "\n"


if __name__ == "__main__":
    OUT.write_text(render())
    sys.stdout.write(f"written {OUT}\n")

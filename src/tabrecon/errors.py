"""Errors tabrecon reports to people: every message names the file, row, column, cell or block at
fault.

The CLI turns a :class:`TabreconError` into one clear line and a non-zero exit, never a traceback.
"""

from __future__ import annotations


class TabreconError(Exception):
    """Base class for errors caused by the user's input or configuration (not by a bug)."""


class InputError(TabreconError):
    """Bad input data: names the file and, where known, the line, column or cell."""

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        line: int | None = None,
        column: str | None = None,
        more: int = 0,
    ) -> None:
        where = []
        if path is not None:
            where.append(str(path))
        if line is not None:
            where.append(f"line {line}")
        if column is not None:
            where.append(f"column {column!r}")
        prefix = ", ".join(where)
        text = f"{prefix}: {message}" if prefix else message
        if more:
            text += f" (and {more} more such row{'s' if more > 1 else ''})"
        super().__init__(text)
        self.path, self.line, self.column = path, line, column


class NetworkError(TabreconError):
    """A server that could not be reached or kept failing (not the user's input): the command
    line exits with its own code (75, try again later), and what finished is kept."""


class InfeasibleError(TabreconError):
    """Published tables that no population can satisfy."""

"""One module per population tabrecon attacks, each a declaration registered with
:mod:`tabrecon.schema.registry` and named as the ``--schema`` value it registers. Adding a
population is adding a module here (see docs/extending.md)."""

from __future__ import annotations

import importlib.util
import pkgutil


def available() -> list[str]:
    """The populations' names without importing them (each module is named as the population it
    registers): what a command's help lists at start-up, at no import cost."""
    spec = importlib.util.find_spec(__name__)
    where = list(spec.submodule_search_locations or []) if spec else []
    return sorted(m.name for m in pkgutil.iter_modules(where))


def choices_help() -> str:
    """``'group_quarters', 'households' or 'persons'`` for an option's help."""
    shown = [f"'{n}'" for n in available()]
    return ", ".join(shown[:-1]) + f" or {shown[-1]}" if len(shown) > 1 else shown[0]

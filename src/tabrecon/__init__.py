"""tabrecon: publish tables from microdata, attack them, certify what they prove, defend, and
measure.

The pipeline, one module per step: :mod:`~tabrecon.schema` (person records) ->
:mod:`~tabrecon.tables` (published tables) -> :mod:`~tabrecon.attacks` (reconstruction,
certification) -> :mod:`~tabrecon.metrics` (agreement) -> report; :mod:`~tabrecon.cli` sits on top.
"""

from __future__ import annotations

__version__ = "0.1.0"

from .errors import InfeasibleError, InputError, TabreconError
from .schema import Microdata, read_microdata, write_microdata
from .synth import SynthConfig, synthesize
from .tables import (
    SF1_TABLES,
    TableSet,
    check_consistency,
    read_tables,
    tabulate,
    write_tables,
)

__all__ = [
    "SF1_TABLES",
    "InfeasibleError",
    "InputError",
    "Microdata",
    "SynthConfig",
    "TableSet",
    "TabreconError",
    "__version__",
    "check_consistency",
    "read_microdata",
    "read_tables",
    "synthesize",
    "tabulate",
    "write_microdata",
    "write_tables",
]

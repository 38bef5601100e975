"""tabrecon: publish tables from microdata, attack them, certify what they prove, defend, and
measure.

The pipeline, one package per layer, imports running one way (``tests/test_architecture.py``):
:mod:`~tabrecon.schema` (what a record is) and :mod:`~tabrecon.records` (records to publish from)
-> :mod:`~tabrecon.tables` (published tables: declared, tabulated, read in every form) ->
:mod:`~tabrecon.engine` (the count model and its solvers, over any schema) ->
:mod:`~tabrecon.attacks` (certification, claims, linkage) and :mod:`~tabrecon.defenses`
(swapping, TopDown, mechanisms) -> :mod:`~tabrecon.populations` (one declaration per
population) -> :mod:`~tabrecon.metrics` -> :mod:`~tabrecon.audit` -> :mod:`~tabrecon.report`;
:mod:`~tabrecon.cli` sits on top.

The whole chain in Python (published or reconstructed data first, the truth as a keyword):

>>> import tabrecon as tr
>>> truth = tr.synthesize(tr.SynthConfig(persons=400), seed=7)   # or tr.read_microdata(path)
>>> tables = tr.tabulate(truth)                                   # or tr.read_tables(path)
>>> run = tr.reconstruct(tables, certify=True, distance=True)
>>> recon, proof = run.records, run.blocks                        # solution variability per block
>>> tr.agree(recon, truth=truth).exact_pct > 50
True
>>> links = tr.reidentify(recon, truth=truth, tables=tables, cert_blocks=proof, seed=7)
>>> release = tr.Defense.parse("swap-lo").protect(truth, rng=7)
>>> outcome = tr.evaluate_defense(truth, "swap-lo", seed=7).to_row()
"""

__version__ = "0.1.0"

import importlib as _importlib
import sys as _sys
import types as _types
from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

#: public name -> the module defining it. Imported on first use (PEP 562), so that ``tabrecon
#: --help`` and every command start without loading the whole toolkit (the CLI imports what a
#: command needs inside it).
_EXPORTS: dict[str, str] = {
    "AuditConfig": "audit.config",
    "Budget": "defenses.matrix",
    "Defense": "defenses.defense",
    "DefenseOutcome": "audit.evaluate",
    "EvaluationPlan": "audit.evaluate",
    "InfeasibleError": "errors",
    "InputError": "errors",
    "Microdata": "schema",
    "PrivacyCost": "defenses.mechanisms",
    "Protected": "defenses.defense",
    "SF1_TABLES": "tables.persons",
    "Strategy": "defenses.matrix",
    "SynthConfig": "records.synth",
    "TableSet": "tables.persons",
    "TabreconError": "errors",
    "Workload": "defenses.matrix",
    "agree": "metrics.agreement",
    "audit": "audit.run",
    "certify": "attacks.release",
    "check_consistency": "tables.consistency",
    "claims": "attacks.release",
    "download": "tables.download",
    "evaluate_defense": "audit.evaluate",
    "expected_error": "metrics.matrix_error",
    "frontier": "metrics.frontier",
    "hierarchy_factors": "metrics.matrix_error",
    "load_config": "audit.config",
    "optimise_shares": "metrics.frontier",
    "read_microdata": "schema",
    "read_sf1": "tables.reader",
    "read_tables": "tables.published",
    "reconstruct": "attacks.release",
    "reidentify": "attacks.reidentify",
    "rr_frontier": "metrics.frontier",
    "RunOptions": "runner",
    "run_demo": "audit.run",
    "run_tradeoff": "audit.tradeoff",
    "simulate_error": "metrics.matrix_error",
    "swap": "defenses.swapping",
    "synthesize": "records.synth",
    "tabulate": "tables.persons",
    "topdown": "defenses.topdown",
    "write_microdata": "schema",
    "write_tables": "tables.published",
}

if _TYPE_CHECKING:  # the same names, for type checkers and the API documentation
    from .attacks.reidentify import reidentify
    from .attacks.release import certify, claims, reconstruct
    from .audit.config import AuditConfig, load_config
    from .audit.evaluate import DefenseOutcome, EvaluationPlan, evaluate_defense
    from .audit.run import audit, run_demo
    from .audit.tradeoff import run_tradeoff
    from .defenses.defense import Defense, Protected
    from .defenses.matrix import Budget, Strategy, Workload
    from .defenses.mechanisms import PrivacyCost
    from .defenses.swapping import swap
    from .defenses.topdown import topdown
    from .errors import InfeasibleError, InputError, TabreconError
    from .metrics.agreement import agree
    from .metrics.frontier import frontier, optimise_shares, rr_frontier
    from .metrics.matrix_error import expected_error, hierarchy_factors, simulate_error
    from .records.synth import SynthConfig, synthesize
    from .runner import RunOptions
    from .schema import Microdata, read_microdata, write_microdata
    from .tables.consistency import check_consistency
    from .tables.download import download
    from .tables.persons import SF1_TABLES, tabulate
    from .tables.published import read_tables, write_tables
    from .tables.reader import read_sf1
    from .tables.tableset import TableSet


def __getattr__(name: str) -> _Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public API only (``dir(tabrecon)``): no helper the package uses to load it."""
    return sorted(__all__)


#: public functions named like the package of the module that defines them (``tabrecon.audit``)
_SHADOWED = frozenset(n for n, m in _EXPORTS.items() if n == m.split(".")[0])


class _Package(_types.ModuleType):
    """The package keeps ``tabrecon.audit`` the function: importing its package (which the import
    system then binds on this one) leaves the name alone, as the eager ``from .audit import
    audit`` did."""

    def __setattr__(self, name: str, value: _Any) -> None:
        if name in _SHADOWED and isinstance(value, _types.ModuleType):
            return
        super().__setattr__(name, value)


_sys.modules[__name__].__class__ = _Package


__all__ = [
    "SF1_TABLES",
    "AuditConfig",
    "Budget",
    "Defense",
    "DefenseOutcome",
    "EvaluationPlan",
    "InfeasibleError",
    "InputError",
    "Microdata",
    "PrivacyCost",
    "Protected",
    "RunOptions",
    "Strategy",
    "SynthConfig",
    "TableSet",
    "TabreconError",
    "Workload",
    "__version__",
    "agree",
    "audit",
    "certify",
    "check_consistency",
    "claims",
    "download",
    "evaluate_defense",
    "expected_error",
    "frontier",
    "hierarchy_factors",
    "load_config",
    "optimise_shares",
    "read_microdata",
    "read_sf1",
    "read_tables",
    "reconstruct",
    "reidentify",
    "rr_frontier",
    "run_demo",
    "run_tradeoff",
    "simulate_error",
    "swap",
    "synthesize",
    "tabulate",
    "topdown",
    "write_microdata",
    "write_tables",
]

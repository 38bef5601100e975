"""Complementary suppression: after the small counts are withheld (primary suppression), further
cells are withheld so that no withheld cell follows exactly from the published ones by the
tables' own identities (a total minus its published parts), as agencies do (tau-Argus, sdcMicro).

Each geounit (block, tract) is protected on its own, with the identities between its published
cells (:func:`tabrecon.tables.consistency.identities_of`: a total equals its lines, two tables'
shared margins are equal). Two passes, repeated until neither withholds anything:

1. *singletons*: an identity with exactly one withheld cell gives it away; the identity's
   smallest published positive count (else its smallest) is withheld too -- the least
   information lost, the modular heuristic's choice;
2. *linear recovery*: for each withheld cell the smallest and largest value the identities
   allow, every withheld cell any count >= 0 (an attacker cannot tell a complement from a
   primary cell), by two linear programs (HiGHS); a cell whose bounds meet is determined, and a
   cell of one of its identities is withheld as above.

Cross-geounit recovery (a tract's cell minus its other blocks') is not protected: each geounit's
tables are protected alone, said where the rule is described.

>>> ids = [("T", ("A", "B"))]                     # T = A + B
>>> out = complementary(["g"] * 3, ["T", "A", "B"], np.array([5, 1, 4]), np.array([5, -1, 4]), ids)
>>> out.tolist()                                   # B withheld too: T - B would give A
[5, -1, -1]
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.optimize import linprog

from .publication import MISSING

#: an identity: a cell and the cells it is the sum of
Identity = tuple[str, tuple[str, ...]]


def complementary(
    geoids: Sequence[str],
    cells: Sequence[str],
    true: np.ndarray,
    shown: np.ndarray,
    identities: Sequence[Identity],
) -> np.ndarray:
    """``shown`` (``MISSING`` where primary suppression withheld the count; the rows' geoids
    and cells given) with the complements withheld too (module docstring); ``true`` the counts,
    which choose the complements."""
    out = np.asarray(shown, dtype=np.int64).copy()
    geo = np.asarray(geoids, dtype=str)
    order = np.argsort(geo, kind="stable")
    starts = np.flatnonzero(np.r_[True, geo[order][1:] != geo[order][:-1]])
    for a, b in zip(starts.tolist(), [*starts[1:].tolist(), geo.size], strict=True):
        rows = order[a:b]
        if not (out[rows] == MISSING).any():
            continue
        at = {str(cells[r]): int(r) for r in rows.tolist()}
        eqs = [
            [at[lhs], *(at[c] for c in rhs)]
            for lhs, rhs in identities
            if lhs in at and all(c in at for c in rhs)
        ]
        _protect(eqs, true, out)
    return out


def _protect(eqs: list[list[int]], true: np.ndarray, out: np.ndarray) -> None:
    """Withhold complements in one geounit (its identities ``eqs``: rows, the first the sum of
    the others) until no withheld cell is given away; ``out`` is changed in place."""
    while True:
        hit = _singleton(eqs, out)
        if hit is None:
            hit = _recovered(eqs, out)
        if hit is None:
            return
        out[_complement(hit, true, out)] = MISSING


def _singleton(eqs: list[list[int]], out: np.ndarray) -> list[int] | None:
    """An identity with exactly one withheld cell, or None."""
    for eq in eqs:
        if int((out[eq] == MISSING).sum()) == 1:
            return eq
    return None


def _recovered(eqs: list[list[int]], out: np.ndarray) -> list[int] | None:
    """An identity holding a withheld cell whose value the identities fix (its smallest and
    largest allowed values equal), or None."""
    touched = [eq for eq in eqs if (out[eq] == MISSING).any()]
    if not touched:
        return None
    hidden = sorted({r for eq in touched for r in eq if out[r] == MISSING})
    col = {r: j for j, r in enumerate(hidden)}
    A = np.zeros((len(touched), len(hidden)))
    b = np.zeros(len(touched))
    for i, eq in enumerate(touched):
        for k, r in enumerate(eq):
            sign = 1.0 if k == 0 else -1.0  # lhs - sum(rhs) = 0
            if out[r] == MISSING:
                A[i, col[r]] += sign
            else:
                b[i] -= sign * out[r]
    for r in hidden:
        c = np.zeros(len(hidden))
        c[col[r]] = 1.0
        lo = linprog(c, A_eq=A, b_eq=b, bounds=(0, None), method="highs")
        hi = linprog(-c, A_eq=A, b_eq=b, bounds=(0, None), method="highs")
        if lo.status == 0 and hi.status == 0 and -hi.fun - lo.fun < 0.5:
            fixable = [eq for eq in touched if r in eq and (out[eq] != MISSING).any()]
            if fixable:  # (a cell every identity of which is withheld whole stays as it is)
                return fixable[0]
    return None


def _complement(eq: list[int], true: np.ndarray, out: np.ndarray) -> int:
    """The cell of ``eq`` to withhold next: its smallest published positive count, else its
    smallest published count."""
    open_ = [r for r in eq if out[r] != MISSING]
    positive = [r for r in open_ if true[r] > 0]
    return min(positive or open_, key=lambda r: (int(true[r]), r))

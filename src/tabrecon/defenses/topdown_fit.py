"""TopDown's estimation and rounding for one parent (:mod:`tabrecon.defenses.topdown` runs them
parent by parent): its children's noisy measurements fitted by weighted non-negative least
squares with the children summing to the parent cell by cell (ADMM, or Clarabel's interior point
where totals are fixed or ADMM does not converge, a penalised refit when both fail), then
rounded to integers that keep every parent cell exact.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from ..errors import TabreconError


class Measurement(NamedTuple):
    """One query's noisy answers for one geounit: the groups of types it answers (``groups``;
    ``inv`` maps each support cell to its group), the noisy counts and their noise variance."""

    query: str
    groups: np.ndarray
    inv: np.ndarray
    noisy: np.ndarray
    variance: float


#: Clarabel's stopping tolerances for the fits: the rounding that follows needs ~1e-4, not 1e-8
FIT_TOL = 1e-6


def fit_ls(
    children_meas: list[list[Measurement]],
    parent: np.ndarray,
    totals: np.ndarray | None,
    penalty: float | None = None,
    pl: tuple[np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
    """Weighted NNLS of all children jointly: sum over children = parent (cell by cell); optional
    fixed child totals. Variables x (children x cells). An answer that covers one cell (the detailed
    query) enters the objective directly, w (x - y)^2; every other answer gets an auxiliary
    r = A x - y (never the normal matrix). With ``penalty`` the parent sums are not equalities but a
    term ``penalty * ||sum_c x_c - parent||^2`` (the fallback when the exact problem fails); the
    caller then rescales to the parent. ``pl`` = (PL cell of each support cell, children x PL
    cells) holds every child's PL 94-171 histogram equal to the published one."""
    import clarabel

    C, S = len(children_meas), parent.size
    nx = C * S
    # the constraint matrix is assembled once from index arrays (columns: x, then the residuals r)
    # in this row order: parent cells, one block per non-direct answer, child totals, PL cells
    cells = np.arange(S)
    rows_i: list[np.ndarray] = []
    cols_i: list[np.ndarray] = []
    vals: list[np.ndarray] = []
    beqs: list[np.ndarray] = []
    weights: list[np.ndarray] = []

    def add(r: np.ndarray, c: np.ndarray, v: float | np.ndarray = 1.0) -> None:
        rows_i.append(r)
        cols_i.append(c)
        vals.append(np.broadcast_to(np.asarray(v, dtype=float), r.shape))

    every_child = (np.tile(cells, C), np.arange(nx))  # sum_c x[c, k]: row k, column c*S + k
    row = 0
    if penalty is None:  # parent cells: sum_c x[c, k] = parent[k]
        add(*every_child)
        beqs.append(parent.astype(float))
        row = S
    pdiag = np.zeros(nx)  # direct terms: sum w (x_i - y_i)^2 = x' diag(w) x - 2 (w y)' x + const
    lin = np.zeros(nx)
    # each other answer: A_q x_c - r = y (the parent, with ``penalty``, spans every child)
    answers: list[tuple[int, np.ndarray, int, np.ndarray, float]] = []  # child, inv, n, y, w
    if penalty is not None:  # the parent as one more (very precise) measurement of all children
        answers.append((-1, cells, S, parent.astype(float), float(penalty)))
    for c, meas in enumerate(children_meas):
        for _q, groups, inv, noisy, var in meas:
            if groups.size == S and np.array_equal(inv, cells):  # one answer per cell
                pdiag[c * S : (c + 1) * S] += 1.0 / var
                lin[c * S : (c + 1) * S] -= np.asarray(noisy, dtype=float) / var
                continue
            answers.append((c, inv, groups.size, np.asarray(noisy, dtype=float), 1.0 / var))
    nr = sum(a[2] for a in answers)
    off = 0
    for c, inv, ng, noisy, wgt in answers:
        if c < 0:
            add(row + every_child[0], every_child[1])
        else:
            add(row + inv, c * S + cells)
        add(row + np.arange(ng), nx + off + np.arange(ng), -1.0)
        beqs.append(noisy)
        weights.append(np.full(ng, wgt))
        row += ng
        off += ng
    if totals is not None:  # fixed child totals
        add(row + np.repeat(np.arange(C), S), np.arange(nx))
        beqs.append(totals.astype(float))
        row += C
    if pl is not None:  # every child's PL 94-171 histogram
        ks, Pk = pl_indicator(pl[0])
        pk = Pk.tocoo()
        K = ks.size
        add(
            row + (np.arange(C)[:, None] * K + pk.row[None, :]).ravel(),
            (np.arange(C)[:, None] * S + pk.col[None, :]).ravel(),
            np.tile(pk.data, C),
        )
        beqs.append(pl[1][:, ks].astype(float).ravel())
        row += C * K
    neq = row
    add(neq + np.arange(nx), np.arange(nx), -1.0)  # G: -x <= 0
    A = sp.csc_matrix(
        (np.concatenate(vals), (np.concatenate(rows_i), np.concatenate(cols_i))),
        shape=(neq + nx, nx + nr),
    )
    A.sum_duplicates()
    beq = np.concatenate(beqs) if beqs else np.zeros(0)
    w = np.concatenate(weights) if weights else np.zeros(0)
    P = sp.diags(np.concatenate([pdiag, w]), format="csc")
    q = np.concatenate([lin, np.zeros(nr)])
    b = np.concatenate([beq, np.zeros(nx)])
    cones = [clarabel.ZeroConeT(neq), clarabel.NonnegativeConeT(nx)]
    st = clarabel.DefaultSettings()
    st.verbose = False
    st.tol_gap_abs = st.tol_gap_rel = st.tol_feas = FIT_TOL
    st.max_threads = 1
    sol = clarabel.DefaultSolver(P, q, A, b, cones, st).solve()
    if str(sol.status) not in ("Solved", "AlmostSolved"):
        raise TabreconError(f"least-squares step failed: {sol.status}")
    x = np.maximum(np.asarray(sol.x[:nx]), 0.0).reshape(C, S)
    x[x < 1e-7] = 0.0
    return x


#: the least-squares solvers for a parent without fixed child totals (``topdown(fit=...)``)
FITS = ("admm", "clarabel")


#: ADMM stops when the largest change of any child cell and the largest gap between the split copies
#: fall below this many persons (the rounding that follows moves cells by whole persons)
ADMM_TOL = 1e-3


ADMM_MAX_ITER = 5000


def project_columns(v: np.ndarray, total: np.ndarray) -> np.ndarray:
    """Euclidean projection of every column of ``v`` (children x cells) onto {z >= 0, sum z =
    total}.

    Michelot's algorithm, vectorised over the columns: the threshold theta starts at the mean excess
    (a lower bound of the optimal one) and each pass recomputes it over the entries still above it;
    it increases monotonically and stops once the active set no longer changes (at most C passes, in
    practice a handful)."""
    C = v.shape[0]
    theta = (v.sum(axis=0) - total) / C
    active = np.ones(v.shape, dtype=bool)
    for _ in range(C + 1):
        act = v > theta
        if np.array_equal(act, active):
            break
        active = act
        cnt = act.sum(axis=0)
        theta = np.where(
            cnt > 0, (np.where(act, v, 0.0).sum(axis=0) - total) / np.maximum(cnt, 1), theta
        )
    return np.maximum(v - theta, 0.0)


def fit_admm(
    children_meas: list[list[Measurement]],
    parent: np.ndarray,
    tol: float = ADMM_TOL,
    max_iter: int = ADMM_MAX_ITER,
) -> tuple[np.ndarray, int]:
    """The same weighted NNLS as :func:`fit_ls` (children sum to the parent cell by cell), solved by
    ADMM so that its cost grows linearly with children x cells: a parent with hundreds of children
    and a large support (a county's tracts) is one interior-point problem too big to factor quickly.

    Split x (the fit) = z (in the set X = {z >= 0, sum over children = parent}, a scaled simplex per
    cell). The x-step is one linear solve per child with the same matrix a I + 2 A' W A for every
    child (A stacks the group indicators of the queries with several cells per answer, a few
    hundred rows): by the Woodbury identity it costs one small inverse (of a few hundred rows) per
    parent and a few sparse and dense products per iteration for all children at once. The z-step
    projects every cell's column onto its simplex. Returns z, which meets the parent sums and
    non-negativity exactly at every iteration, and the number of iterations. Raises TabreconError
    when it does not reach ``tol`` (the caller falls back).
    """
    import scipy.linalg as sl

    C, S = len(children_meas), parent.size
    d = 0.0  # weight of the one-cell answers (the detailed query)
    b1 = np.zeros((C, S))
    A_rows, W_rows, Y_cols = [], [], []
    for qi, (_q, groups, inv, _noisy, var) in enumerate(children_meas[0]):
        if groups.size == S and np.array_equal(inv, np.arange(S)):
            d += 1.0 / var
            for c, meas in enumerate(children_meas):
                b1[c] += np.asarray(meas[qi].noisy, dtype=float) / var
            continue
        A_rows.append(sp.csr_matrix((np.ones(S), (inv, np.arange(S))), shape=(groups.size, S)))
        W_rows.append(np.full(groups.size, 1.0 / var))
        Y_cols.append(np.stack([np.asarray(meas[qi].noisy, dtype=float) for meas in children_meas]))
    if d <= 0:
        raise TabreconError(
            "the ADMM fit needs a query with one answer per cell (the detailed query)"
        )
    A = sp.vstack(A_rows, format="csr") if A_rows else sp.csr_matrix((0, S))
    W = np.concatenate(W_rows) if W_rows else np.zeros(0)
    Y = np.hstack(Y_cols) if Y_cols else np.zeros((C, 0))
    AT = A.T.tocsr()
    AAT = (A @ AT).toarray()
    base = (
        2.0 * b1 + 2.0 * (AT @ (Y * W).T).T
    )  # the constant part of every x-step's right-hand side
    rho = 2.0 * d

    def refactor(r: float):
        # K is small (one row per group answer) and well conditioned: an explicit inverse makes each
        # x-step two matrix products (a triangular solve with many right-hand sides is slower here)
        a = 2.0 * d + r
        K = (a / 2.0) * np.diag(1.0 / W) + AAT if W.size else np.zeros((0, 0))
        return a, (sl.cho_solve(sl.cho_factor(K), np.eye(K.shape[0])) if W.size else None)

    alpha, factor = refactor(rho)
    z = project_columns(np.maximum(b1 / d, 0.0), parent.astype(float))
    u = np.zeros((C, S))
    p = parent.astype(float)
    for it in range(1, max_iter + 1):
        rhs = base + rho * (z - u)
        if W.size:
            corr = (factor @ (A @ rhs.T)).T  # C x R
            x = (rhs - (AT @ corr.T).T) / alpha
        else:
            x = rhs / alpha
        z_old = z
        z = project_columns(x + u, p)
        u += x - z
        r_pri = np.abs(x - z).max()
        r_dual = rho * np.abs(z - z_old).max()
        if r_pri < tol and np.abs(z - z_old).max() < tol:
            return z, it
        if it % 20 == 0:  # residual balancing: keep the two residuals within a factor of 10
            if r_pri > 10 * r_dual:
                rho *= 2.0
                u /= 2.0
                alpha, factor = refactor(rho)
            elif r_dual > 10 * r_pri:
                rho /= 2.0
                u *= 2.0
                alpha, factor = refactor(rho)
    raise TabreconError(
        f"ADMM fit did not reach {tol:g} persons in {max_iter} iterations "
        f"(gap {r_pri:.2g}, step {np.abs(z - z_old).max():.2g})"
    )


def pl_indicator(plc: np.ndarray) -> tuple[np.ndarray, sp.csr_matrix]:
    """The PL cells present in a support and the (PL cells x support) 0/1 matrix."""
    ks, kinv = np.unique(plc, return_inverse=True)
    return ks, sp.csr_matrix(
        (np.ones(plc.size), (kinv, np.arange(plc.size))), shape=(ks.size, plc.size)
    )


def round_children(
    x: np.ndarray,
    parent: np.ndarray,
    totals: np.ndarray | None,
    pl: tuple[np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
    """Integer children: floors plus 0/1 per cell, parent cells exact (and fixed totals, or every
    child's PL 94-171 histogram), min sum (1-2r) y. With the PL histograms the LP is a
    transportation problem per PL cell (children x its types): totally unimodular, so its vertex
    is integral."""
    from scipy.optimize import linprog

    F = np.floor(x + 1e-9).astype(np.int64)
    r = np.clip(x - F, 0.0, 1.0)
    need = parent.astype(np.int64) - F.sum(axis=0)
    if (need < 0).any():
        raise TabreconError("rounding: floors exceed a parent cell")
    cols = np.flatnonzero(need > 0)
    C = x.shape[0]
    if pl is not None:
        ks, Pk = pl_indicator(pl[0])
        left = pl[1][:, ks].astype(np.int64) - (Pk @ F.T).T.astype(np.int64)  # C x K
        if (left < 0).any():
            raise TabreconError("rounding: floors exceed a child's PL 94-171 count")
        if not cols.size:
            if left.any():
                raise TabreconError("rounding: a child's PL 94-171 count cannot be met")
            return F
    elif not cols.size:
        return F
    if totals is None and pl is None:  # separable by cell: the largest remainders take the need
        if need.max() > C:
            raise TabreconError("rounding: a parent cell needs more units than it has children")
        order = np.argsort(-r, axis=0, kind="stable")
        rank = np.empty_like(order)
        np.put_along_axis(rank, order, np.broadcast_to(np.arange(C)[:, None], order.shape), axis=0)
        return F + (rank < need[None, :])
    ci = np.repeat(np.arange(C), cols.size)
    ki = np.tile(cols, C)
    n = ci.size
    kpos = np.searchsorted(cols, ki)
    A_eq = [sp.csr_matrix((np.ones(n), (kpos, np.arange(n))), shape=(cols.size, n))]
    b_eq = [need[cols]]
    if pl is not None:
        kinv = np.searchsorted(ks, pl[0])
        A_eq.append(
            sp.csr_matrix(
                (np.ones(n), (ci * ks.size + kinv[ki], np.arange(n))), shape=(C * ks.size, n)
            )
        )
        b_eq.append(left.ravel())
    elif totals is not None:
        A_eq.append(sp.csr_matrix((np.ones(n), (ci, np.arange(n))), shape=(C, n)))
        b_eq.append(totals - F.sum(axis=1))
    res = linprog(
        1 - 2 * r[ci, ki],
        A_eq=sp.vstack(A_eq),
        b_eq=np.concatenate(b_eq),
        bounds=(0, 1),
        method="highs-ds",
    )
    if res.x is None:
        raise TabreconError(f"rounding failed: {res.message}")
    y = np.rint(res.x).astype(np.int64)
    if np.abs(res.x - y).max() > 1e-6:
        raise TabreconError("rounding: the LP's solution is not integral")
    F[ci, ki] += y
    return F


#: weight of the parent-sum term in the fallback fit, relative to 1/variance of the measurements
FALLBACK_PENALTY = 1e4


def fit_penalised(
    metas, pcounts, totals, where: str, exc: Exception, log: list[str], pl=None
) -> np.ndarray:
    """The exact fit failed at one parent: relax the parent sums into a penalty, rescale each cell
    to the parent, round (parent cells exact). If even that fails, split the parent by the
    children's noisy totals. Under PL 94-171 constraints: split each PL cell's types among the
    children in proportion to their published PL counts (always feasible), then round. Every
    use is reported in ``log``."""
    if pl is not None:
        plc, M = pl
        ks, Pk = pl_indicator(plc)
        kinv = np.searchsorted(ks, plc)
        cell_tot = np.asarray(Pk @ pcounts.astype(float)).ravel()  # parent count per PL cell
        share = np.where(cell_tot[kinv] > 0, pcounts / np.where(cell_tot > 0, cell_tot, 1)[kinv], 0)
        x = M[:, ks][:, kinv] * share[None, :]
        log.append(f"{where}: {exc}; children split each PL 94-171 cell in proportion")
        return round_children(x, pcounts, None, pl)
    try:
        var = min(m.variance for meas in metas for m in meas)
        x = fit_ls(metas, pcounts, totals, penalty=FALLBACK_PENALTY / var)
        col = x.sum(axis=0)
        x = np.where(
            col > 0, x * (pcounts / np.where(col > 0, col, 1.0)), 1.0 / x.shape[0] * pcounts
        )
        xi = round_children(x, pcounts, totals)
        log.append(
            f"{where}: {exc}; refitted with the parent sums as a penalty, then rescaled to the "
            "parent"
        )
        return xi
    except TabreconError as exc2:
        w = np.array([max(m[0].noisy.sum(), 0.0) for m in metas]) + 1e-9
        log.append(
            f"{where}: {exc}; the penalised refit failed too ({exc2}); children got shares of the "
            "parent"
        )
        return round_children(np.outer(w / w.sum(), pcounts), pcounts, None)


def fit_auto(
    metas: list[list[Measurement]],
    pcounts: np.ndarray,
    totals: np.ndarray | None,
    fit: str = "admm",
    log: list[str] | None = None,
    where: str = "",
    pl: tuple[np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
    """The fit for one parent: ADMM unless the children have fixed totals (the states), PL
    94-171 histograms to meet, or ``fit`` is ``clarabel``; the interior-point fit also when ADMM
    does not converge (noted in ``log``)."""
    if pl is not None:
        return fit_ls(metas, pcounts, None, pl=pl)
    if totals is None and fit == "admm":
        try:
            return fit_admm(metas, pcounts)[0]
        except TabreconError as exc:
            if log is not None:
                log.append(f"{where}: {exc}; solved by the interior-point fit instead")
    return fit_ls(metas, pcounts, totals)

"""One small interface over the open integer solvers (OR-Tools CP-SAT, HiGHS).

An :class:`IntProgram` is built from arrays: a sparse constraint matrix with row bounds and integer
variables with bounds; an optional linear objective. :func:`solve` hands it to a backend and returns
a :class:`Solution` whose status distinguishes a proof (``optimal``/``infeasible``) from a time-out.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

BACKENDS = ("cpsat", "highs")


@dataclass
class IntProgram:
    """min/max c.x  s.t.  lo <= A x <= hi,  lb <= x <= ub,  x integer."""

    A: sp.csr_matrix
    lo: np.ndarray
    hi: np.ndarray
    ub: np.ndarray
    lb: np.ndarray | None = None
    c: np.ndarray | None = None
    maximize: bool = False

    @property
    def n_vars(self) -> int:
        return int(self.A.shape[1])

    @property
    def n_rows(self) -> int:
        return int(self.A.shape[0])


@dataclass
class SolverOptions:
    backend: str = "cpsat"
    threads: int = 1
    time_limit: float | None = 60.0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(f"unknown solver {self.backend!r}; choose from {', '.join(BACKENDS)}")


@dataclass
class Solution:
    status: str  # optimal | feasible | infeasible | timeout | error
    x: np.ndarray | None
    objective: float | None = None
    bound: float | None = None
    seconds: float = 0.0
    backend: str = ""
    info: dict = field(default_factory=dict)

    @property
    def has_solution(self) -> bool:
        return self.x is not None and self.status in ("optimal", "feasible")


def build_cpsat(prog: IntProgram):
    """A CP-SAT model filled straight from the program's arrays (no Python expression objects)."""
    from ortools.sat.python import cp_model

    m = cp_model.CpModel()
    proto = m.proto
    lb = np.zeros(prog.n_vars, dtype=np.int64) if prog.lb is None else prog.lb.astype(np.int64)
    ub = prog.ub.astype(np.int64)
    for lo_, hi_ in zip(lb.tolist(), ub.tolist(), strict=True):
        proto.variables.add().domain.extend([lo_, hi_])
    A = prog.A.tocsr()
    indptr, indices, data = A.indptr, A.indices.tolist(), A.data.astype(np.int64).tolist()
    lo, hi = prog.lo.astype(np.int64).tolist(), prog.hi.astype(np.int64).tolist()
    for r in range(prog.n_rows):
        s, e = indptr[r], indptr[r + 1]
        lin = proto.constraints.add().linear
        lin.vars.extend(indices[s:e])
        lin.coeffs.extend(data[s:e])
        lin.domain.extend([lo[r], hi[r]])
    if prog.c is not None:
        nz = np.flatnonzero(prog.c)
        obj = proto.objective
        obj.vars.extend(nz.tolist())
        coeffs = prog.c[nz].astype(np.int64)
        if prog.maximize:
            obj.coeffs.extend((-coeffs).tolist())
            obj.scaling_factor = -1.0
        else:
            obj.coeffs.extend(coeffs.tolist())
    return m


def solve_cpsat_model(
    m, n_vars: int, opts: SolverOptions, t0: float, maximize: bool = False
) -> Solution:
    from ortools.sat.python import cp_model

    solver = cp_model.CpSolver()
    solver.parameters.num_workers = max(1, opts.threads)
    solver.parameters.random_seed = opts.seed
    if opts.time_limit:
        solver.parameters.max_time_in_seconds = float(opts.time_limit)
    st = solver.solve(m)
    name = solver.status_name(st)
    x = None
    if st in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        x = np.asarray(solver.response_proto.solution, dtype=np.int64)[:n_vars]
    has_obj = m.has_objective()
    status = {
        "OPTIMAL": "optimal",
        "FEASIBLE": "feasible" if has_obj else "optimal",
        "INFEASIBLE": "infeasible",
        "UNKNOWN": "timeout",
        "MODEL_INVALID": "error",
    }.get(name, "error")
    if name == "FEASIBLE" and has_obj:
        status = "timeout" if solver.wall_time >= (opts.time_limit or 1e18) * 0.99 else "feasible"
    obj = bound = None
    if has_obj and x is not None:
        obj, bound = solver.objective_value, solver.best_objective_bound
    return Solution(status, x, obj, bound, time.perf_counter() - t0, "cpsat", {"raw": name})


def _solve_highs(prog: IntProgram, opts: SolverOptions) -> Solution:
    import highspy

    t0 = time.perf_counter()
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("threads", max(1, opts.threads))
    h.setOptionValue("random_seed", opts.seed)
    if opts.time_limit:
        h.setOptionValue("time_limit", float(opts.time_limit))
    lp = highspy.HighsLp()
    n, mrows = prog.n_vars, prog.n_rows
    lp.num_col_, lp.num_row_ = n, mrows
    c = np.zeros(n) if prog.c is None else prog.c.astype(float)
    lp.col_cost_ = -c if prog.maximize else c
    lp.col_lower_ = np.zeros(n) if prog.lb is None else prog.lb.astype(float)
    lp.col_upper_ = prog.ub.astype(float)
    lp.row_lower_ = prog.lo.astype(float)
    lp.row_upper_ = prog.hi.astype(float)
    A = prog.A.tocsr()
    lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
    lp.a_matrix_.start_ = A.indptr.astype(np.int32)
    lp.a_matrix_.index_ = A.indices.astype(np.int32)
    lp.a_matrix_.value_ = A.data.astype(float)
    lp.integrality_ = [highspy.HighsVarType.kInteger] * n
    h.passModel(lp)
    h.run()
    ms = h.modelStatusToString(h.getModelStatus())
    x = None
    status = {
        "Optimal": "optimal",
        "Infeasible": "infeasible",
        "Time limit reached": "timeout",
    }.get(ms, "error")
    if h.getInfo().primal_solution_status == 2:  # feasible point available
        x = np.rint(np.asarray(h.getSolution().col_value)).astype(np.int64)
        if status == "timeout" and prog.c is None:
            status = "optimal"
    obj = bound = None
    if prog.c is not None and x is not None:
        info = h.getInfo()
        sgn = -1.0 if prog.maximize else 1.0
        obj, bound = sgn * info.objective_function_value, sgn * info.mip_dual_bound
    return Solution(status, x, obj, bound, time.perf_counter() - t0, "highs", {"raw": ms})


def solve(prog: IntProgram, opts: SolverOptions | None = None) -> Solution:
    """Solve an integer program with the chosen backend. Never raises for solver outcomes."""
    opts = opts or SolverOptions()
    if prog.n_vars == 0:
        ok = bool(np.all(prog.lo <= 0) and np.all(prog.hi >= 0))
        return Solution(
            "optimal" if ok else "infeasible",
            np.zeros(0, dtype=np.int64) if ok else None,
            backend=opts.backend,
        )
    if opts.backend == "highs":
        return _solve_highs(prog, opts)
    t0 = time.perf_counter()
    m = build_cpsat(prog)
    return solve_cpsat_model(m, prog.n_vars, opts, t0, prog.maximize)

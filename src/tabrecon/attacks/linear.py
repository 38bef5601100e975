"""Linear reconstruction (Dinur & Nissim 2003; JASON JSR-19-2F section 4): rebuild an n-bit database
from m noisy answers to random subset-sum queries.

An :class:`Instance` is the secret bits x, the query matrix Q (each bit in each query with
probability 1/2) and the answers a = Q x + noise. Decoders are functions from (Q, a) to bits:

* ``lsq`` -- bounded least squares on [0, 1]^n, then rounding (the JASON method): the unconstrained
  solution when it lies in the box, else ADMM with a cached Cholesky factor (BVLS as fallback).
* ``lp`` -- LP decoding: minimise ||Q x - a||_1 over [0, 1]^n (Dinur-Nissim; Dwork-McSherry-Talwar),
  HiGHS, then rounding.
* ``exact`` -- integer decoding for noiseless or bounded noise: find x in {0,1}^n with
  |Q x - a| <= E (CP-SAT, and for noiseless answers lattice reduction from maximum-entropy
  marginals,
  :mod:`tabrecon.attacks.lattice`), and try to prove with CP-SAT that no other such x exists. Like
  every decoder's output, what it finds counts as recovered when it equals the truth; the proof is
  the stronger claim an attacker can make without the truth, reported on its own.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

from ..errors import TabreconError
from ..interrupts import stoppable

NOISES = ("none", "gaussian", "laplace", "discrete_gaussian", "discrete_laplace", "bounded")
DECODERS = ("lsq", "lp", "exact")
MEMORY_FRACTION = 0.5  # of physical memory a dense query matrix may take


def jason_sigma(n: int) -> float:
    """JASON's noise scale for the Gaussian experiments: sqrt(n) ln(n) / 2."""
    return math.sqrt(n) * math.log(n) / 2


def check_size(n: int, m: int, what: str = "query matrix") -> None:
    """Refuse sizes whose dense float64 matrix would not fit, naming what it needs and what fits."""
    if n <= 0 or m <= 0:
        raise TabreconError(f"n and m must be positive (got n={n}, m={m})")
    import os

    need = 8.0 * n * m
    have = MEMORY_FRACTION * os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    if need > have:
        largest = int(have / (8.0 * n))
        raise TabreconError(
            f"a {m:,} x {n:,} {what} needs {need / 2**30:.1f} GiB; {have / 2**30:.1f} GiB may be "
            "used "
            f"(half the memory): at n = {n:,} at most m = {largest:,} queries fit"
        )


@dataclass
class Instance:
    """Secret bits, queries and (noisy) answers."""

    x: np.ndarray  # (n,) 0/1
    Q: np.ndarray  # (m, n) 0/1 float64
    a: np.ndarray  # (m,) answers (float or int)

    @property
    def n(self) -> int:
        return int(self.x.size)

    def first(self, m: int) -> Instance:
        """The same database answered by its first m queries (for sweeps over m)."""
        return Instance(self.x, self.Q[:m], self.a[:m])


def noise(
    kind: str,
    m: int,
    rng: np.random.Generator,
    *,
    sigma: float | None = None,
    epsilon: float | None = None,
    rho: float | None = None,
    bound: int | None = None,
    n: int | None = None,
) -> np.ndarray:
    """Noise for m answers. Each query has sensitivity 1 (one bit changes a subset sum by at most
    1).

    ``gaussian``/``laplace`` are floating-point (experiments only, never a release);
    ``discrete_gaussian``/``discrete_laplace`` are OpenDP's exact samplers; ``bounded`` is uniform
    on the integers in [-bound, bound].
    """
    from ..defenses.mechanisms import discrete_gaussian, discrete_laplace

    if kind == "none":
        return np.zeros(m)
    if kind == "gaussian":
        s = sigma if sigma is not None else jason_sigma(n or 2)
        if s < 0:
            raise TabreconError(f"sigma must be >= 0 (got {s})")
        return rng.normal(0.0, s, size=m)
    if kind == "laplace":
        if epsilon is None or epsilon <= 0:
            raise TabreconError(f"epsilon must be > 0 (got {epsilon})")
        return rng.laplace(0.0, 1.0 / epsilon, size=m)
    if kind == "discrete_laplace":
        if epsilon is None:
            raise TabreconError("discrete_laplace noise needs epsilon")
        return discrete_laplace(epsilon, 1.0).sample(m).astype(float)
    if kind == "discrete_gaussian":
        if rho is None:
            raise TabreconError("discrete_gaussian noise needs rho")
        return discrete_gaussian(rho, 1.0).sample(m).astype(float)
    if kind == "bounded":
        if bound is None or bound < 0:
            raise TabreconError(f"bounded noise needs bound >= 0 (got {bound})")
        return rng.integers(-bound, bound + 1, size=m).astype(float)
    raise TabreconError(f"unknown noise {kind!r}; choose from {', '.join(NOISES)}")


def make_instance(
    n: int, m: int, rng: np.random.Generator, noise_kind: str = "none", **noise_args
) -> Instance:
    """A random database of n bits, m random subset queries, and their (noisy) answers."""
    check_size(n, m)
    x = rng.integers(0, 2, size=n)
    Q = (rng.random((m, n)) < 0.5).astype(np.float64)
    a = Q @ x + noise(noise_kind, m, rng, n=n, **noise_args)
    return Instance(x, Q, a)


def _admm_box_lsq(
    Q: np.ndarray, a: np.ndarray, tol: float = 1e-8, iters: int = 5000
) -> np.ndarray | None:
    """min ||Q x - a||^2 on [0,1]^n by ADMM with one cached Cholesky factor; None if not converged.

    Used when Q has full column rank (m >= n): the minimiser is then unique and ADMM converges to
    it.
    """
    import scipy.linalg as sl

    n = Q.shape[1]
    G = Q.T @ Q
    b = Q.T @ a
    rho = float(np.trace(G)) / n
    try:
        cf = sl.cho_factor(G + rho * np.eye(n))
    except np.linalg.LinAlgError:
        return None
    z = np.full(n, 0.5)
    u = np.zeros(n)
    lim = tol * np.sqrt(n)
    for k in range(iters):
        x = sl.cho_solve(cf, b + rho * (z - u))
        zn = np.clip(x + u, 0.0, 1.0)
        u += x - zn
        r, d = np.linalg.norm(x - zn), rho * np.linalg.norm(zn - z)
        z = zn
        if r < lim and d < lim:
            return z
        if k % 25 == 24:  # a rounded iterate with zero residual is a global minimiser: stop there
            xr = np.rint(z)
            if np.abs(Q @ xr - a).max() < 1e-9:
                return xr
    return None


def decode_lsq(Q: np.ndarray, a: np.ndarray, method: str = "auto") -> np.ndarray:
    """Bounded least squares on [0,1]^n, rounded.

    m >= n: the unconstrained solution when it lies in the box (then it is the bounded minimiser).
    Otherwise ADMM (``auto``/``admm``; BVLS when it does not converge) or BVLS (``bvls``: the exact
    active-set method, up to 100x slower near m = n/2). With m < n the minimisers may form a face;
    both methods return one of them.
    """
    from scipy.optimize import lsq_linear

    m, n = Q.shape
    if m >= n:
        z, *_ = np.linalg.lstsq(Q, a, rcond=None)
        if z.min() >= -1e-9 and z.max() <= 1 + 1e-9:
            return (z > 0.5).astype(np.int64)
    if method in ("auto", "admm"):
        # m < n: the minimisers may form a face and ADMM creeps; give it a short run (it stops at
        # once
        # on a zero-residual rounded iterate, the recovered database) and let BVLS settle the rest
        z = _admm_box_lsq(Q, a, iters=5000 if m >= n or method == "admm" else 400)
        if z is not None:
            return (z > 0.5).astype(np.int64)
    z = lsq_linear(Q, a, bounds=(0.0, 1.0), method="bvls").x
    return (z > 0.5).astype(np.int64)


def decode_lp(Q: np.ndarray, a: np.ndarray) -> np.ndarray:
    """LP decoding: min ||Q x - a||_1 over [0,1]^n (HiGHS), rounded."""
    import scipy.sparse as sp
    from scipy.optimize import linprog

    m, n = Q.shape
    eye = sp.identity(m, format="csr")
    A = sp.hstack([sp.csr_matrix(Q), eye, -eye], format="csr")  # Q x + e_minus - e_plus = a
    c = np.concatenate([np.zeros(n), np.ones(2 * m)])
    bounds = [(0.0, 1.0)] * n + [(0.0, None)] * (2 * m)
    r = linprog(c, A_eq=A, b_eq=a, bounds=bounds, method="highs")
    if r.x is None:
        raise TabreconError(f"LP decoding failed: {r.message}")
    return (r.x[:n] > 0.5).astype(np.int64)


@dataclass
class ExactResult:
    x: np.ndarray | None
    unique: bool  # proven: no other database gives these answers (within the noise bound)
    status: str  # unique | ambiguous | unproven | timeout | infeasible
    seconds: float
    found_by: str = ""  # cpsat | lattice: which finder produced x


FINDERS = ("auto", "cpsat", "lattice")


def _cpsat_model(Qi: np.ndarray, ai: np.ndarray, bound: int):
    from ortools.sat.python import cp_model

    m, n = Qi.shape
    model = cp_model.CpModel()
    xs = [model.new_bool_var(f"x{i}") for i in range(n)]
    for r in range(m):
        idx = np.flatnonzero(Qi[r])
        model.add_linear_constraint(sum(xs[i] for i in idx), int(ai[r] - bound), int(ai[r] + bound))
    return model, xs


def _cpsat_solve(model, seconds: float, seed: int):
    from ortools.sat.python import cp_model

    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = seed
    solver.parameters.max_time_in_seconds = float(max(0.1, seconds))
    solver.parameters.catch_sigint_signal = False  # tabrecon.interrupts stops the search instead
    with stoppable(solver):
        return solver, solver.solve(model)


def prove_unique(
    Q: np.ndarray,
    a: np.ndarray,
    x: np.ndarray,
    bound: int = 0,
    time_limit: float = 10.0,
    seed: int = 0,
) -> str:
    """Whether x is the only database in {0,1}^n with |Q x - a| <= bound: CP-SAT looks for another.

    ``unique`` (proven: none exists), ``ambiguous`` (one was found) or ``timeout``.
    """
    from ortools.sat.python import cp_model

    n = Q.shape[1]
    model, xs = _cpsat_model(np.rint(Q).astype(np.int64), np.rint(a).astype(np.int64), bound)
    model.add(
        sum(xs[i] for i in range(n) if x[i] == 0) + sum(1 - xs[i] for i in range(n) if x[i] == 1)
        >= 1
    )
    _, st = _cpsat_solve(model, time_limit, seed)
    if st == cp_model.INFEASIBLE:
        return "unique"
    if st in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return "ambiguous"
    return "timeout"


def decode_exact(
    Q: np.ndarray,
    a: np.ndarray,
    bound: int = 0,
    time_limit: float = 10.0,
    seed: int = 0,
    hint: np.ndarray | None = None,
    finder: str = "auto",
    prove: bool = True,
    proof_time_limit: float | None = None,
) -> ExactResult:
    """Integer decoding: x in {0,1}^n with |Q x - a| <= bound, then (``prove``) a proof that it is
    the only one.

    ``finder``: ``cpsat`` searches with CP-SAT alone; ``lattice`` uses
    :func:`tabrecon.attacks.lattice.lattice_find` (noiseless answers, needs fpylll); ``auto``
    (default) gives CP-SAT a tenth of ``time_limit`` (it either finds the database at once or takes
    minutes), then the lattice 80% of it, then CP-SAT the rest; where the lattice does not apply,
    CP-SAT all of it in one run. The proof gets ``proof_time_limit`` seconds (default: what finding
    left of ``time_limit``). Status: ``unique`` (proven), ``ambiguous`` (another database answers
    the same), ``unproven`` (found; no proof asked for, or it ran out of time), ``timeout`` (nothing
    found) or ``infeasible`` (no database gives these answers).
    """
    import time

    from ortools.sat.python import cp_model

    from . import lattice

    if finder not in FINDERS:
        raise TabreconError(f"unknown finder {finder!r}; choose from {', '.join(FINDERS)}")
    t0 = time.perf_counter()
    n = Q.shape[1]
    Qi = np.rint(Q).astype(np.int64)
    ai = np.rint(a).astype(np.int64)
    why_not = lattice.import_error() if finder != "cpsat" and bound == 0 else None
    use_lattice = finder != "cpsat" and bound == 0 and why_not is None
    if finder == "lattice" and not use_lattice:
        raise TabreconError(
            f"the lattice finder needs noiseless answers (bound 0) and {why_not or 'fpylll'}"
        )
    if finder == "auto" and why_not is not None:
        warnings.warn(f"exact decoding runs CP-SAT alone: {why_not}", stacklevel=2)

    def left() -> float:
        return time_limit - (time.perf_counter() - t0)

    model, xs = _cpsat_model(Qi, ai, bound)
    if hint is not None:
        for i in range(n):
            model.add_hint(xs[i], int(hint[i]))
    x, found_by = None, ""
    if not use_lattice:  # one CP-SAT run: a second would replay the first one's search
        budgets = [("cpsat", 1.0)]
    else:
        budgets = {
            "lattice": [("lattice", 1.0)],
            "auto": [("cpsat", 0.1), ("lattice", 0.8), ("cpsat", 1.0)],
        }[finder]
    for how, share in budgets:
        if how == "lattice":
            x = lattice.lattice_find(Qi, ai, time_limit=max(0.0, min(left(), share * time_limit)))
        else:
            budget = min(left(), share * time_limit) if share < 1 else left()
            solver, st = _cpsat_solve(model, budget, seed)
            if st == cp_model.INFEASIBLE:
                return ExactResult(None, False, "infeasible", time.perf_counter() - t0, how)
            if st in (cp_model.OPTIMAL, cp_model.FEASIBLE):
                x = np.array([solver.value(v) for v in xs], dtype=np.int64)
        if x is not None:
            found_by = how
            break
        if left() <= 0:
            break
    if x is None:
        return ExactResult(None, False, "timeout", time.perf_counter() - t0)
    if not prove:
        return ExactResult(x, False, "unproven", time.perf_counter() - t0, found_by)
    st2 = prove_unique(
        Qi, ai, x, bound, left() if proof_time_limit is None else proof_time_limit, seed
    )
    status = {"unique": "unique", "ambiguous": "ambiguous", "timeout": "unproven"}[st2]
    return ExactResult(x, st2 == "unique", status, time.perf_counter() - t0, found_by)


def decode(decoder: str, Q: np.ndarray, a: np.ndarray, **kw) -> np.ndarray | None:
    """Bits from a decoder; ``exact`` gives the database it found (None when it found none).

    Like the other decoders' guesses, its bits count as recovered when they equal the truth; whether
    they were also proven unique is :func:`decode_exact`'s ``unique``.
    """
    if decoder == "lsq":
        return decode_lsq(Q, a)
    if decoder == "lp":
        return decode_lp(Q, a)
    if decoder == "exact":
        return decode_exact(Q, a, **kw).x
    raise TabreconError(f"unknown decoder {decoder!r}; choose from {', '.join(DECODERS)}")


def fraction_recovered(inst: Instance, decoder: str = "lsq", **kw) -> float:
    """Share of the database's bits the decoder gets right (exact finding nothing: 0 recovered)."""
    x = decode(decoder, inst.Q, inst.a, **kw)
    return 0.0 if x is None else float((x == inst.x).mean())


def queries_needed(inst: Instance, decoder: str = "lsq", lo: int = 1, **kw) -> int | None:
    """Smallest m (binary search over the instance's first m queries) at which every bit is
    recovered.

    Assumes recovery is monotone in m for nested query sets (it is, up to rare exceptions near the
    threshold); None when even all the instance's queries do not suffice.
    """
    hi = inst.Q.shape[0]
    if fraction_recovered(inst.first(hi), decoder, **kw) < 1.0:
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        if fraction_recovered(inst.first(mid), decoder, **kw) == 1.0:
            hi = mid
        else:
            lo = mid + 1
    return hi


def info_bound_noiseless(n: np.ndarray | float) -> np.ndarray | float:
    """About 2n / log2(n) noiseless subset-sum answers are needed to determine n bits (JASON App.
    A)."""
    return 2 * np.asarray(n, dtype=float) / np.log2(n)


def info_bound_noisy(sigma: float) -> float:
    """At large noise about 16 sigma^2 / ln 2 queries are needed (JASON section 4.5, as stated in
    the text)."""
    return 16 * sigma**2 / math.log(2)

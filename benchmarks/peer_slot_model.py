"""The Census Bureau's per-slot binary formulation (peer model for the speed comparison).

As in uscensusbureau/recon_replication ``recon/s3_pandas_synth_lp_files.py`` (described in
../shared/notes/methods.md section 2): every positive block P12 cell (block, sex, age bin, n) gets
binaries B(p, a, r, h) for slot p < n, each single age a in the bin, 63 races and 2 ethnicities
(126 * n * width binaries); every published cell becomes one equality over the binaries in its
product set; a dummy objective. No zero elimination, no bounds beyond {0, 1}: the solver's presolve
does that work, as Gurobi's did for the Bureau.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from tabrecon.engine.solvers import IntProgram
from tabrecon.schema import N_RACES, encode_types
from tabrecon.tables.persons import all_cells, cell_index, weight_matrix
from tabrecon.tables.tableset import MISSING, TableSet


def build_slot_model(ts: TableSet, tract: str) -> tuple[IntProgram, np.ndarray, np.ndarray]:
    """(program, block index of each binary, type of each binary) for one tract, all 34 tables."""
    W = weight_matrix()
    cs, idx = all_cells(), cell_index()
    bg = ts["block"]
    bm = np.char.startswith(bg.geoids.astype(str), tract)
    bvals, bcells = bg.values[bm], bg.cells
    var_block, var_type = [], []
    # the P12 sex x age-bin cells (lines 003-025 and 027-049)
    p12 = [
        j
        for j, c in enumerate(bcells)
        if cs[idx[c]].table == "P12"
        and cs[idx[c]].sex != "any"
        and (cs[idx[c]].age_min, cs[idx[c]].age_max) != (0, 110)
    ]
    for b in range(bvals.shape[0]):
        for j in p12:
            n = int(bvals[b, j])
            if n <= 0:
                continue
            c = cs[idx[bcells[j]]]
            ages = np.arange(c.age_min, c.age_max + 1)
            s = 0 if c.sex == "male" else 1
            a, r, h = np.meshgrid(ages, np.arange(1, N_RACES + 1), np.arange(2), indexing="ij")
            t = encode_types(np.full(a.size, s), a.ravel(), r.ravel(), h.ravel())
            var_type.append(np.tile(t, n))
            var_block.append(np.full(t.size * n, b, dtype=np.int32))
    vt = np.concatenate(var_type)
    vb = np.concatenate(var_block)
    n = vt.size
    rows, cols, data, rhs = [], [], [], []
    bcol = np.array([idx[c] for c in bcells])
    M = W[vt][:, bcol].tocoo()
    key = vb[M.row].astype(np.int64) * len(bcells) + M.col
    present = bvals.ravel()[key] != MISSING
    uk, inv = np.unique(key[present], return_inverse=True)
    rows.append(inv)
    cols.append(M.row[present])
    data.append(M.data[present].astype(np.int64))
    rhs.append(bvals.ravel()[uk])
    nrow = len(uk)
    tg = ts.grids.get("tract")
    if tg is not None and (tg.geoids == tract).any():
        tv = tg.values[tg.geoids == tract][0]
        tcol = np.array([idx[c] for c in tg.cells])
        Mt = W[vt][:, tcol].tocoo()
        keep = tv[Mt.col] != MISSING
        uk, inv = np.unique(Mt.col[keep], return_inverse=True)
        rows.append(nrow + inv)
        cols.append(Mt.row[keep])
        data.append(Mt.data[keep].astype(np.int64))
        rhs.append(tv[uk])
        nrow += len(uk)
    A = sp.csr_matrix(
        (np.concatenate(data), (np.concatenate(rows), np.concatenate(cols))), shape=(nrow, n)
    )
    rhs_all = np.concatenate(rhs)
    return IntProgram(A=A, lo=rhs_all, hi=rhs_all.copy(), ub=np.ones(n, dtype=np.int64)), vb, vt

"""Reidentification: link reconstructed records to what an attacker knows, confirm against the
truth, and score the attack beside the statistical baselines (Abowd et al. Algorithms 3-4; Francis;
Ruggles & Van Riper).

* **Attacker data** (:func:`simulate_attacker`, :func:`read_attacker`): one row per record the
  attacker holds -- ``pik`` (an identifier), ``block_geoid``, ``sex``, ``age``; no race, no
  ethnicity. ``perfect`` is every person exactly (the Bureau's CEF_atkr); ``commercial`` has
  partial coverage, ages off by one, persons in the wrong block, duplicates and records of nobody
  (rates in
  :class:`CommercialErrors`).
* **Putative reidentification** (Algorithm 3): within each block, attacker records are matched
  one-to-one to the race source's records on (sex, exact age), then the residuals on (sex,
  agebin38); each matched attacker record inherits the source record's race, ethnicity and age.
  Ties inside a match key are broken by a seeded uniform draw on both sides (the Bureau used stored
  U(0,1) draws and file order; counts of matches per key are the same either way, only *which* pair
  is matched depends on the draw).
* **Confirmation** (Algorithm 4): a putative record is confirmed when the truth person behind its
  ``pik`` lives in that block and has the same sex, race flags, ethnicity and age (exact, else the
  same agebin38). Each truth person is confirmed at most once.
* **Rates**: putative % and confirmed % of attacker records, precision = confirmed / putative.

The baselines replace the race source on the *same putative set* (methods.md section 4): MDG (the
block's modal race x ethnicity from the published block tables), PRG (a draw proportional to the
block's counts), the release of the truth itself (upper bound), Ruggles-Van Riper's random
reconstruction (blocks rebuilt from the national sex x age distribution, race right with the
probability of the average majority share) and Francis' majority-race inference (precision and
recall curves per person, scored on the truth).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import polars as pl

from ..errors import TabreconError
from ..geo import overlap
from ..schema import (
    AGE_MAX,
    AGEBIN_OF_AGE,
    BLOCK_SIZE_LABELS,
    Microdata,
    combo_counts,
    combo_id,
    range_classes,
    size_bin,
)
from ..tables.tableset import TableSet
from .attacker import (
    ATTACKER_PRESETS,
    AttackerReport,
    CommercialErrors,
    person_ids,
    read_attacker,
    simulate_attacker,
    validate_attacker,
)
from .baselines import (
    block_counts_from_tables,
    francis_majority,
    mdg_guess,
    modal_combo,
    proportional_guess,
)
from .certify import certified_geoids


# --------------------------------------------------------------------------------------------------
# Linkage
# --------------------------------------------------------------------------------------------------
def _match_pass(
    lkey: np.ndarray,
    rkey: np.ndarray,
    rng: np.random.Generator,
    lsort: np.ndarray | None = None,
    rsort: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """One-to-one matches of equal keys (-1 = not taking part), ties broken by seeded draws.

    Within a key, each side is ordered by its ``*sort`` values (none: all equal), then by
    random draws, and the i-th left meets the i-th right: exactly min(n_left, n_right) pairs per
    key. Returns (left index, right index) of the pairs.
    """

    def ranked(key: np.ndarray, by: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        idx = np.flatnonzero(key >= 0)
        draws = rng.random(idx.size)
        order = idx[_sort_by_draws(key[idx], None if by is None else by[idx], draws)]
        k = key[order]
        start = np.r_[0, np.flatnonzero(k[1:] != k[:-1]) + 1] if k.size else np.zeros(0, np.int64)
        rank = np.arange(k.size) - np.repeat(start, np.diff(np.r_[start, k.size]))
        return order, k, rank

    lo, lk, lr = ranked(lkey, lsort)
    ro, rk, rr = ranked(rkey, rsort)
    span = max(int(lr.max(initial=0)), int(rr.max(initial=0))) + 1
    lc = lk * span + lr
    rc = rk * span + rr
    common, il, ir = np.intersect1d(lc, rc, assume_unique=True, return_indices=True)
    return lo[il], ro[ir]


def truth_rows(piks: pl.Series, ids: np.ndarray) -> np.ndarray:
    """The row of ``ids`` (distinct person ids of the truth) behind each attacker ``pik``, -1
    where none is (a pik the truth does not hold, or a missing one): a hash join, where sorting
    the id strings and searching them cost 3.3 CPU s per 1,000,096 persons against 1.2 (making
    the ids included).

    >>> truth_rows(pl.Series(["p2", "x", None, "p0", "p2"]), np.array(["p0", "p1", "p2"]))
    array([ 2, -1, -1,  0,  2])
    """
    rows = (
        pl.DataFrame({"pik": piks.cast(pl.String)})
        .join(
            pl.DataFrame({"pik": pl.Series(ids, dtype=pl.String)}).with_row_index("row"),
            on="pik",
            how="left",
            maintain_order="left",
        )
        .get_column("row")
    )
    return rows.cast(pl.Int64).fill_null(-1).to_numpy()


def _sort_by_draws(key: np.ndarray, by: np.ndarray | None, draws: np.ndarray) -> np.ndarray:
    """The order ``np.lexsort((draws, key))`` (``by`` given: ``(draws, by, key)``) returns, from
    one sort of a single integer per record: the key, then ``by``, then the draw's rank. At
    1,000,096 persons this is 0.10 s against lexsort's 0.32 per pass. Where that integer
    could overflow, lexsort itself.

    >>> key, by = np.array([2, 0, 2, 0, 2]), np.array([1, 0, 0, 0, 1])
    >>> draws = np.random.default_rng(5).random(5)
    >>> (_sort_by_draws(key, by, draws) == np.lexsort((draws, by, key))).all()
    np.True_
    """
    n = key.size
    if not n:
        return np.zeros(0, dtype=np.int64)
    rank = np.empty(n, dtype=np.int64)
    rank[np.argsort(draws, kind="stable")] = np.arange(n)
    klo, khi = int(key.min()), int(key.max())
    blo, bspan = (0, 1) if by is None else (int(by.min()), int(by.max()) - int(by.min()) + 1)
    if (khi - klo + 1) * bspan * n >= 2**62:  # (never near at a county's or a state's size)
        return np.lexsort((draws, key) if by is None else (draws, by, key))
    composite = key.astype(np.int64) - klo
    if by is not None:
        composite = composite * bspan + (by.astype(np.int64) - blo)
    return np.argsort(composite * n + rank)


#: How the agebin pass pairs the records of one key (:func:`link`)
LINK_ORDERS = ("random", "bureau")


def link(
    att_block: np.ndarray,
    att_sex: np.ndarray,
    att_age: np.ndarray,
    src_block: np.ndarray,
    src_sex: np.ndarray,
    src_age: np.ndarray,
    src_exact: np.ndarray,
    *,
    seed: int = 0,
    starts: np.ndarray | None = None,
    order: str = "random",
) -> tuple[np.ndarray, np.ndarray]:
    """Algorithm 3: attacker -> source record index (-1 = none) and pass (1 exact age, 2 agebin).

    ``starts`` (:func:`~tabrecon.schema.range_classes`): the source's ages are known only to
    classes coarser than some agebin38 bins, and the second pass links on those.

    ``order`` is how the agebin pass pairs the records of one (block, sex, agebin): ``random``
    (seeded draws on both sides), or ``bureau`` as the Bureau's ``match.py`` does it -- the
    source side taken oldest first, each record taking the youngest attacker record left, so
    that within a bin the oldest source record meets the youngest attacker record."""
    if order not in LINK_ORDERS:
        raise TabreconError(f"unknown linkage order {order!r}; choose {', '.join(LINK_ORDERS)}")
    coarse = (lambda a: a) if starts is None else (lambda a: starts[a])
    rng = np.random.default_rng(seed)
    na = att_block.size
    base_a = att_block.astype(np.int64) * 2 + att_sex
    base_s = src_block.astype(np.int64) * 2 + src_sex
    ka = base_a * 128 + att_age
    ks = np.where(src_exact, base_s * 128 + src_age, -1)
    ka = np.where(att_block >= 0, ka, -1)
    la, ls = _match_pass(ka, ks, rng)
    match = np.full(na, -1, dtype=np.int64)
    how = np.zeros(na, dtype=np.int8)
    match[la], how[la] = ls, 1
    used = np.zeros(src_block.size, dtype=bool)
    used[ls] = True
    kb_a = np.where(
        (match < 0) & (att_block >= 0),
        base_a * 64 + AGEBIN_OF_AGE[coarse(np.clip(att_age, 0, AGE_MAX))],
        -1,
    )
    kb_s = np.where(~used, base_s * 64 + AGEBIN_OF_AGE[coarse(src_age)], -1)
    if order == "bureau":
        la, ls = _match_pass(kb_a, kb_s, rng, att_age, -src_age)
    else:
        la, ls = _match_pass(kb_a, kb_s, rng)
    match[la], how[la] = ls, 2
    return match, how


# --------------------------------------------------------------------------------------------------
# The whole comparison
# --------------------------------------------------------------------------------------------------
SOURCES = ("attack", "mdg", "prg", "truth", "rvr")


#: the putative set of each source: the baselines share the attack's (methods.md section 4)
PUTATIVE = {
    "attack": "putative",
    "mdg": "putative",
    "prg": "putative",
    "truth": "putative_truth",
    "rvr": "putative_rvr",
}


GROUPS = ("all", "modal", "nonmodal", "uniques", "certified_nonmodal", "certified_uniques")


#: What a reidentification summary gives per source and group.
RATE_COLUMNS = (
    "attacker_records",
    "putative",
    "confirmed",
    "putative_pct",
    "confirmed_pct",
    "precision_pct",
)


@dataclass
class ReidResult:
    """Per attacker record: putative link, inherited attributes per source, confirmations,
    groups."""

    records: pl.DataFrame
    attacker_report: AttackerReport
    francis: pl.DataFrame  # per truth person: precision of the majority inference
    meta: dict

    def rates(self, by_bin: bool = False) -> pl.DataFrame:
        """Putative %, confirmed % and precision per source and group (and block-size bin)."""
        r = self.records
        rows = []
        bins = [("all", None)] + (
            [(lab, i) for i, lab in enumerate(BLOCK_SIZE_LABELS)] if by_bin else []
        )
        for g in GROUPS:
            gm = r[g] if g != "all" else pl.Series(np.ones(r.height, dtype=bool))
            for lab, bi in bins:
                m = gm if bi is None else gm & (r["size_bin"] == bi)
                sub = r.filter(m)
                n = sub.height
                for s in SOURCES:
                    put = int(sub[PUTATIVE[s]].sum()) if n else 0
                    conf = int(sub[f"confirmed_{s}"].sum()) if n else 0
                    rows.append(
                        {
                            "group": g,
                            "bin": lab,
                            "source": s,
                            "attacker_records": n,
                            "putative": put,
                            "confirmed": conf,
                            "putative_pct": 100.0 * put / n if n else None,
                            "confirmed_pct": 100.0 * conf / n if n else None,
                            "precision_pct": 100.0 * conf / put if put else None,
                        }
                    )
        pct = {c: pl.Float64 for c in ("putative_pct", "confirmed_pct", "precision_pct")}
        return pl.DataFrame(rows, schema_overrides=pct)

    def person_precision(self, source: str = "attack") -> np.ndarray:
        """Each putatively linked person's block precision for ``source`` (confirmed / putative
        in the block): what Francis' Figure 1 plots the distribution of."""
        r = self.records.filter(pl.col("putative"))
        if not r.height:
            return np.zeros(0)
        per = r.group_by("block_geoid").agg(
            (pl.col(f"confirmed_{source}").sum() / pl.len()).alias("p"), pl.len().alias("n")
        )
        return np.repeat(per["p"].to_numpy(), per["n"].to_numpy())

    def expected_prg(self, group: str = "nonmodal", original: bool = False) -> tuple[float, int]:
        """(PRG's expected confirmations, the attack's putative count) in ``group``: the exact mean
        of what ``rates`` samples once. ``original``: the guess drawn from the unprotected block
        counts instead of the published tables (they differ only when the release is protected)."""
        r = self.records if group == "all" else self.records.filter(pl.col(group))
        col = "expected_prg_original" if original else "expected_prg"
        return float(r[col].sum()), int(r["putative"].sum())

    def expected_prg_precision(self, group: str = "nonmodal", original: bool = False) -> float:
        """PRG's precision in expectation over its draw (see :meth:`expected_prg`), per cent."""
        e, put = self.expected_prg(group, original)
        return 100.0 * e / put if put else float("nan")

    def summary(self) -> dict:
        rt = self.rates()
        out: dict = {"meta": self.meta, "attacker": asdict(self.attacker_report)}
        for s in SOURCES:
            out[s] = {}
            for g in GROUPS:
                row = rt.filter((pl.col("source") == s) & (pl.col("group") == g)).row(0, named=True)
                out[s][g] = {k: row[k] for k in RATE_COLUMNS}
        return out


@dataclass
class TruthSide:
    """Reidentification's work that reads only the truth, the attacker's data and the published
    tables (:func:`truth_side`): the attacker's records placed, the truth behind each, the
    baselines' guesses (MDG, PRG, Ruggles-Van Riper), the truth's own linkage, the groups and
    Francis's majority test. Made ahead (the audit makes it while the workers reconstruct),
    :func:`reidentify` uses it when it was made from the same inputs over the same blocks and
    makes it again otherwise, so its result never depends on whether it was made ahead."""

    #: what it was made from (the inputs' identities and the options), checked on use
    inputs: tuple
    geoids: np.ndarray
    att: pl.DataFrame
    preset: str
    report: AttackerReport
    #: arrays by name (the attacker's records', the truth's and the blocks')
    a: dict[str, np.ndarray]
    share: float
    mdg_rule: np.ndarray
    francis: pl.DataFrame


def _inputs(truth, attacker, tables, seed, errors, francis_threshold, rvr_share, link_order):
    who = attacker if isinstance(attacker, str) else id(attacker)
    return (id(truth), who, id(tables), seed, errors, francis_threshold, rvr_share, link_order)


def truth_side(
    truth: Microdata,
    attacker: pl.DataFrame | str = "perfect",
    tables: TableSet | None = None,
    seed: int = 0,
    errors: CommercialErrors | None = None,
    francis_threshold: int = 5,
    rvr_share: float | None = None,
    link_order: str = "random",
    geoids: np.ndarray | None = None,
) -> TruthSide:
    """:func:`reidentify`'s work that needs no reconstruction (:class:`TruthSide`), over the
    blocks ``geoids`` (default: the truth's; :func:`reidentify` uses the union of the truth's
    and the reconstruction's). Arguments as :func:`reidentify`'s.

    >>> from tabrecon.records.synth import SynthConfig, synthesize
    >>> md = synthesize(SynthConfig(persons=300), seed=1)
    >>> ahead = truth_side(md, seed=3)
    >>> reidentify(md, md, seed=3, prepared=ahead).records.equals(
    ...     reidentify(md, md, seed=3).records)
    True
    """
    from ..tables.persons import tabulate

    truth_name = truth.source or "the truth"
    geoids = truth.geoids if geoids is None else geoids
    rng = np.random.default_rng(seed)
    if isinstance(attacker, str) and attacker in ATTACKER_PRESETS:
        att = simulate_attacker(truth, attacker, seed, errors)
        preset = attacker
    elif isinstance(attacker, str):
        att, preset = read_attacker(attacker), attacker
    else:
        att, preset = attacker, "given"
    if not isinstance(attacker, str) or attacker not in ATTACKER_PRESETS:
        overlap(
            att["block_geoid"].unique().to_numpy().astype(str),
            truth.inhabited_blocks(),
            attacker if isinstance(attacker, str) else "the attacker data",
            truth_name,
            "blocks",
        )
    att, rep = validate_attacker(
        att, geoids, preset if preset not in (*ATTACKER_PRESETS, "given") else "attacker"
    )
    ablock_g = att["block_geoid"].to_numpy().astype(str)
    pos = np.searchsorted(geoids, ablock_g)
    known = (pos < len(geoids)) & (geoids[np.minimum(pos, len(geoids) - 1)] == ablock_g)
    ablock = np.where(known, pos, -1)
    asex = (att["sex"].to_numpy() == "female").astype(np.int64)
    aage = att["age"].to_numpy().astype(np.int64)
    # truth behind each pik
    apik = att["pik"].cast(pl.String).to_numpy().astype(str)
    tperson = truth_rows(att["pik"], person_ids(truth))
    has_truth = tperson >= 0
    t_bidx = truth.blocks_in(geoids)
    tblock = np.where(has_truth, t_bidx[np.maximum(tperson, 0)], -2)
    tcombo = combo_id(truth.race, truth.hisp)
    # block race x ethnicity counts: published (MDG/PRG) and true (modal groups)
    pub_ts = tables if tables is not None else tabulate(truth, ["P8", "P9"])
    pgeo, pcounts = block_counts_from_tables(pub_ts)
    pidx = np.searchsorted(pgeo, geoids)
    pin = (pidx < len(pgeo)) & (pgeo[np.minimum(pidx, len(pgeo) - 1)] == geoids)
    counts = np.zeros((len(geoids), 128), dtype=np.int64)
    counts[pin] = pcounts[pidx[pin]]
    mdg, mdg_rule = mdg_guess(geoids, counts)
    true_counts = combo_counts(truth, geoids)
    national = true_counts.sum(axis=0)
    mode = modal_combo(geoids, true_counts, national)
    cum = np.cumsum(counts, axis=1)
    tot = cum[:, -1]
    u = rng.random(att.height)
    pb = np.maximum(ablock, 0)
    draw = (u * tot[pb]).astype(np.int64)
    combo_truth = np.where(has_truth, tcombo[np.maximum(tperson, 0)], -1)
    tsex = np.where(has_truth, truth.sex[np.maximum(tperson, 0)], -1)
    tage = truth.age.astype(np.int64)[np.maximum(tperson, 0)]
    # upper bound: the truth itself released and linked the same way
    tm, _ = link(
        ablock,
        asex,
        aage,
        t_bidx,
        truth.sex.astype(np.int64),
        truth.age.astype(np.int64),
        np.ones(len(truth), dtype=bool),
        seed=seed + 1,
        order=link_order,
    )
    put_truth = tm >= 0
    tmi = np.maximum(tm, 0)
    conf_truth = (
        put_truth
        & has_truth
        & (tblock == ablock)
        & (tsex == truth.sex[tmi])
        & (tcombo[tmi] == combo_truth)
        & (AGEBIN_OF_AGE[truth.age[tmi]] == AGEBIN_OF_AGE[tage])
    )
    # Ruggles-Van Riper: a random record of the right sex and age in the block exists with the
    # chance the national sex x age mix gives; race right with the average majority share
    share = rvr_share
    if share is None:
        in_mode = tcombo == mode[t_bidx]
        share = float(in_mode.mean()) if len(truth) else 0.0
    rvr_put, rvr_conf = _rvr(
        truth, geoids, ablock, asex, aage, has_truth, tperson, tblock, share, rng
    )
    nonmodal_t = tcombo != mode[t_bidx]
    sab = (t_bidx.astype(np.int64) * 2 + truth.sex) * 64 + AGEBIN_OF_AGE[truth.age]
    _, inv, cnt = np.unique(sab, return_inverse=True, return_counts=True)
    arrays = {
        "ablock": ablock,
        "ablock_g": ablock_g,
        "asex": asex,
        "aage": aage,
        "apik": apik,
        "has_truth": has_truth,
        "tperson": tperson,
        "tblock": tblock,
        "counts": counts,
        "true_counts": true_counts,
        "tot": tot,
        "pb": pb,
        "mdg": mdg[pb],
        "prg": proportional_guess(cum, pb, draw),
        "combo_truth": combo_truth,
        "tsex": tsex,
        "tage": tage,
        "t_bidx": t_bidx,
        "put_truth": put_truth,
        "conf_truth": conf_truth,
        "rvr_put": rvr_put,
        "rvr_conf": rvr_conf,
        "nonmodal_t": nonmodal_t,
        "unique_t": cnt[inv] == 1,
    }
    francis = francis_majority(geoids, counts, true_counts, truth, francis_threshold)
    key = _inputs(truth, attacker, tables, seed, errors, francis_threshold, rvr_share, link_order)
    return TruthSide(key, geoids, att, preset, rep, arrays, share, mdg_rule, francis)


def reidentify(
    recon: Microdata,
    truth: Microdata,
    attacker: pl.DataFrame | str = "perfect",
    *,
    tables: TableSet | None = None,
    cert_blocks: pl.DataFrame | None = None,
    seed: int = 0,
    errors: CommercialErrors | None = None,
    francis_threshold: int = 5,
    rvr_share: float | None = None,
    link_order: str = "random",
    prepared: TruthSide | None = None,
) -> ReidResult:
    """Run the attack and every baseline on the same putative set (see module docstring).

    ``tables`` are the published block tables (MDG, PRG); tabulated from ``truth`` when not given
    -- the same numbers, since the release is tabulated from it. ``cert_blocks`` (``tabrecon
    solvar`` output) marks certified blocks. ``rvr_share`` is the Ruggles-Van Riper probability
    that race is right (default: the measured share of persons in their block's modal group).
    ``link_order`` is how the agebin pass pairs records within a key (:func:`link`).
    ``prepared``: :func:`truth_side` made ahead from these same arguments (made again when it
    was made from others, or over other blocks).
    """
    for name, md in (("reconstruction", recon), ("truth", truth)):
        if md.block.size == 0:  # nothing to link or to confirm against: no rate to report
            raise TabreconError(f"the {name} holds no person records: there is nothing to link")
    truth_name = truth.source or "the truth"
    overlap(
        recon.inhabited_blocks(),
        truth.inhabited_blocks(),
        recon.source or "the reconstruction",
        truth_name,
    )
    if tables is not None:
        overlap(tables.inhabited_blocks(), truth.inhabited_blocks(), tables.source, truth_name)
    geoids = np.union1d(truth.geoids, recon.geoids)
    key = _inputs(truth, attacker, tables, seed, errors, francis_threshold, rvr_share, link_order)
    ts = prepared
    if ts is None or ts.inputs != key or not np.array_equal(ts.geoids, geoids):
        ts = truth_side(
            truth, attacker, tables, seed, errors, francis_threshold, rvr_share, link_order, geoids
        )
    a = ts.a
    ablock, has_truth, tperson, tblock = a["ablock"], a["has_truth"], a["tperson"], a["tblock"]
    pb = a["pb"]
    # race source: the reconstruction
    rblock = recon.blocks_in(geoids)
    rexact = np.ones(len(recon), bool) if recon.age_exact is None else recon.age_exact.astype(bool)
    starts = range_classes(recon)  # ages the tables give only as ranges are linked and confirmed so
    match, how = link(
        ablock,
        a["asex"],
        a["aage"],
        rblock,
        recon.sex.astype(np.int64),
        recon.age.astype(np.int64),
        rexact,
        seed=seed,
        starts=starts,
        order=link_order,
    )
    put = match >= 0
    # sources' (race combo, age) for each putative record
    src_combo = {}
    src_age = recon.age.astype(np.int64)[np.maximum(match, 0)]
    src_combo["attack"] = combo_id(recon.race, recon.hisp)[np.maximum(match, 0)]
    src_combo["mdg"] = a["mdg"]
    src_combo["prg"] = a["prg"]
    src_combo["truth"] = a["combo_truth"]
    # confirmation: same block, sex, race x ethnicity, age (exact, else agebin) as the truth person
    same_person = (
        put & has_truth & (tblock == ablock) & (a["tsex"] == recon.sex[np.maximum(match, 0)])
    )
    cls = (lambda v: v) if starts is None else (lambda v: starts[v])
    age_ok = AGEBIN_OF_AGE[cls(src_age)] == AGEBIN_OF_AGE[cls(a["tage"])]
    conf = {}
    for s in ("attack", "mdg", "prg"):
        conf[s] = same_person & age_ok & (src_combo[s] == src_combo["truth"])
    # PRG's chance of confirming each record (the draw's expectation: no sampling noise): the share
    # of the person's own group in the block, from the published tables and from the unprotected
    # counts (the Bureau's Table 6 baseline for a defense)
    counts, true_counts, tot = a["counts"], a["true_counts"], a["tot"]
    tc = np.maximum(src_combo["truth"], 0)
    can = same_person & age_ok & (src_combo["truth"] >= 0)
    ttot = true_counts.sum(axis=1)
    expected_prg = np.where(can & (tot[pb] > 0), counts[pb, tc] / np.maximum(tot[pb], 1), 0.0)
    expected_prg_original = np.where(
        can & (ttot[pb] > 0), true_counts[pb, tc] / np.maximum(ttot[pb], 1), 0.0
    )
    conf["truth"] = a["conf_truth"]
    conf["rvr"] = a["rvr_conf"]
    # each truth person is confirmed once
    for s in conf:
        conf[s] = _once(conf[s], tperson)
    # groups, by the truth person behind the record -- only where that person lives in the
    # record's block (the Bureau links the putative file to the CEF on block and pik, so a record
    # at a stale address or of nobody has no group: Abowd et al. Table 5 counts 14,990 thousand
    # COMRCL nonmodal putatives against 62,810 for CEF_atkr)
    has_truth = has_truth & (tblock == ablock)
    tb = np.maximum(tperson, 0)
    t_bidx, nonmodal_t = a["t_bidx"], a["nonmodal_t"]
    certified_b = np.zeros(len(geoids), dtype=bool)
    if cert_blocks is not None and cert_blocks.height:
        certified_b = np.isin(geoids, certified_geoids(cert_blocks))
    pop = np.bincount(t_bidx, minlength=len(geoids))
    nonmodal = has_truth & nonmodal_t[tb]
    uniques = has_truth & a["unique_t"][tb]
    cert = has_truth & certified_b[t_bidx[tb]]
    records = pl.DataFrame(
        {
            "pik": a["apik"],
            "block_geoid": a["ablock_g"],
            "putative": put,
            "pass": how,
            "in_truth": has_truth,  # the person behind the pik lives in this block
            "size_bin": np.where(has_truth, size_bin(pop[t_bidx[tb]]), size_bin(pop[pb])).astype(
                np.int8
            ),
            "modal": has_truth & ~nonmodal_t[tb],
            "nonmodal": nonmodal,
            "uniques": uniques,
            "certified_nonmodal": cert & nonmodal,
            "certified_uniques": cert & nonmodal & uniques,
            "putative_truth": a["put_truth"],
            "putative_rvr": a["rvr_put"],
            **{f"confirmed_{s}": conf[s] for s in SOURCES},
            "expected_prg": expected_prg,
            "expected_prg_original": expected_prg_original,
        }
    )
    meta = {
        "attacker": ts.preset,
        "seed": seed,
        "francis_threshold": francis_threshold,
        "rvr_share": ts.share,
        "mdg_rules": {
            f"rule{k}": int((ts.mdg_rule[np.unique(pb[put])] == k).sum()) for k in (1, 2, 3, 4)
        },
        "tie_breaking": "seeded uniform draws on both sides within each match key",
        "certified_blocks": int(certified_b.sum()),
    }
    return ReidResult(records, ts.report, ts.francis, meta)


def _once(confirmed: np.ndarray, person: np.ndarray) -> np.ndarray:
    """Keep the first confirmation of each truth person (duplicates in attacker data)."""
    idx = np.flatnonzero(confirmed)
    _, first = np.unique(person[idx], return_index=True)
    out = np.zeros_like(confirmed)
    out[idx[first]] = True
    return out


def _rvr(truth, geoids, ablock, asex, aage, has_truth, tperson, tblock, share, rng):
    """Ruggles-Van Riper null model: each block rebuilt from the national sex x age distribution.

    A block of N persons gets N random (sex, age) records; attacker records are matched to them
    as in Algorithm 3 and a match is confirmed when it is the right person's block and the race
    draw (probability ``share``) succeeds.
    """
    t_bidx = truth.blocks_in(geoids)
    pop = np.bincount(t_bidx, minlength=len(geoids))
    n = int(pop.sum())
    pick = rng.integers(0, len(truth), size=n)  # national sex x age mix = the truth's own
    sblock = np.repeat(np.arange(len(geoids)), pop)
    ssex = truth.sex.astype(np.int64)[pick]
    sage = truth.age.astype(np.int64)[pick]
    match, _ = link(
        ablock,
        asex,
        aage,
        sblock,
        ssex,
        sage,
        np.ones(n, dtype=bool),
        seed=int(rng.integers(1 << 31)),
    )
    put = match >= 0
    tage = truth.age.astype(np.int64)[np.maximum(tperson, 0)]
    tsex = truth.sex.astype(np.int64)[np.maximum(tperson, 0)]
    ok = put & has_truth & (tblock == ablock) & (tsex == ssex[np.maximum(match, 0)])
    ok &= AGEBIN_OF_AGE[sage[np.maximum(match, 0)]] == AGEBIN_OF_AGE[tage]
    return put, ok & (rng.random(ablock.size) < share)

"""One evaluation path: the tradeoff sweep and the audit report the same defense rows, and
outcomes of pieces add up."""

from __future__ import annotations

import math

import polars as pl
import pytest
from rich.console import Console

import tabrecon as tr
from tabrecon.audit.evaluate import DefenseOutcome, EvaluationPlan, evaluate_defense


@pytest.fixture(scope="module")
def county():
    return tr.synthesize(tr.SynthConfig(persons=2500), seed=12)


def _same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, rel=1e-12, abs=1e-12)
    return a == b


def test_tradeoff_and_audit_give_identical_defense_rows(county, tmp_path):
    specs = ["none", "swap-lo", "swap=0.3"]
    cfg = tr.load_config(
        None,
        run={"seed": 21},
        reconstruct={"levels": ["block+tract"]},
        defenses={"specs": specs},
    )
    src = tmp_path / "county.parquet"
    tr.write_microdata(county, src)
    quiet = Console(file=open("/dev/null", "w"))
    sweep = tr.run_tradeoff(
        county, specs, tmp_path / "t", seed=21, console=quiet, plan=EvaluationPlan.from_config(cfg)
    )
    tr.audit(src, tmp_path / "a", cfg, console=quiet, show_progress=False)
    audited = pl.read_csv(tmp_path / "a" / "results" / "defenses.csv")
    assert audited["defense"].to_list() == specs == sweep["defense"].to_list()
    columns = [c for c in audited.columns]
    assert set(columns) <= set(sweep.columns)
    for a, t in zip(audited.iter_rows(named=True), sweep.iter_rows(named=True), strict=True):
        differ = {c: (a[c], t[c]) for c in columns if not _same(a[c], t[c])}
        assert not differ, f"{a['defense']}: audit and tradeoff differ on {differ}"
    # the rows say something: the undefended release is attacked, swapping moves persons
    none, lo = audited.row(0, named=True), audited.row(1, named=True)
    assert none["attack_all_putative"] > 0 and none["tvd_block"] == 1.0
    assert lo["tvd_block"] < 1.0


def test_outcomes_of_pieces_add_up(county):
    a = evaluate_defense(county, "swap-lo", seed=1)
    b = evaluate_defense(county, "swap-lo", seed=2)
    m = a.merge(b)
    assert m.persons == 2 * len(county) and m.blocks == a.blocks + b.blocks
    assert m.rates["all/attack"] == [
        x + y for x, y in zip(a.rates["all/attack"], b.rates["all/attack"], strict=True)
    ]
    row = m.to_row()
    put = m.rates["nonmodal/attack"][1]
    conf = m.rates["nonmodal/attack"][2]
    assert row["attack_nonmodal_precision"] == pytest.approx(100.0 * conf / put)
    assert DefenseOutcome.from_json(m.to_json()) == m


def test_topdown_outcome_carries_its_cost_and_the_noisy_measurement_attack(county):
    plan = EvaluationPlan(certify=False)
    o = evaluate_defense(county, "rho=1e6", plan, seed=3)
    assert o.rho == 1e6 and o.epsilon == tr.PrivacyCost.zcdp(1e6).epsilon
    assert o.nmf is not None and o.nmf["failed_blocks"] == 0
    row = o.to_row()
    # at a huge budget the noisy measurements are the truth: the fit recovers nearly everyone
    assert row["nmf_agreement_binned_pct"] > 99
    assert math.isnan(evaluate_defense(county, "none", plan, seed=3).to_row()["nmf_all_precision"])


def test_a_resumed_evaluation_attacks_the_same_release(county, tmp_path):
    plan = EvaluationPlan(certify=False, noisy_measurement_attack=False)
    first = evaluate_defense(county, "rho=0.5", plan, seed=3, work=tmp_path)
    again = evaluate_defense(county, "rho=0.5", plan, seed=3, work=tmp_path)
    assert _rows_equal(first, again)
    fresh = evaluate_defense(county, "rho=0.5", plan, seed=3, work=tmp_path, resume=False)
    assert fresh.l1 != first.l1  # new noise: a new release


def _rows_equal(a: DefenseOutcome, b: DefenseOutcome) -> bool:
    ra, rb = a.to_row(), b.to_row()
    return all(_same(ra[k], rb[k]) for k in ra)

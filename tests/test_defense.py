"""Defenses as values: one parser for every spec, one interface, privacy costs of one type."""

from __future__ import annotations

import pytest

from tabrecon.defenses.defense import DHC2023_RHO, Defense, Swapping, TopDown
from tabrecon.defenses.mechanisms import PrivacyCost, discrete_gaussian, discrete_laplace
from tabrecon.errors import TabreconError
from tabrecon.records.synth import SynthConfig, synthesize


@pytest.fixture(scope="module")
def county():
    return synthesize(SynthConfig(persons=1500), seed=5)


def test_every_spec_parses_to_its_defense():
    assert Defense.parse("none") == Defense("none") and Defense.parse("none").cost is None
    lo, hi = Defense.parse("swap-lo"), Defense.parse("swap-hi")
    assert isinstance(lo, Swapping) and lo.config.rate == 0.05 and hi.config.rate == 0.5
    custom = Defense.parse("swap=0.2")
    assert isinstance(custom, Swapping) and custom.config.rate == 0.2 and custom.cost is None
    dhc = Defense.parse("dhc2023-like")
    assert isinstance(dhc, TopDown) and dhc.rho == DHC2023_RHO
    assert Defense.parse("rho=2.5").cost == PrivacyCost.zcdp(2.5)
    eps = Defense.parse("eps=17.14")
    assert eps.cost is not None
    assert eps.cost.rho == pytest.approx(2.5562, abs=0.002)  # CKS at delta 1e-10, inverted
    assert eps.cost.epsilon == pytest.approx(17.14, abs=0.01)


def test_tradeoff_help_names_every_defense_the_parser_takes():
    """``tradeoff --defenses``' help is written out (the CLI does not import the defenses to
    print it); every named spec of the parser's grammar must be in it, and each must parse."""
    import re

    from tabrecon.cli.commands.defend import DEFENSES_HELP
    from tabrecon.defenses.defense import GRAMMAR

    names = [n for n in re.split(r",\s*|\s+or\s+", GRAMMAR) if n and "<" not in n]
    assert {"swap-2010", "dhc2020-production"} <= set(names)
    for name in names:
        assert name in DEFENSES_HELP, name
        assert Defense.parse(name).name == name


@pytest.mark.parametrize(
    "spec, message",
    [
        ("shuffle", "unknown defense"),
        ("swap=abc", "must be a number"),
        ("eps=x", "must be a number"),
        ("swap=1.5", "a rate in"),
        ("rho=-1", "finite positive"),
        ("eps=inf", "finite positive"),
        ("rho=nan", "finite positive"),
    ],
)
def test_bad_specs_are_refused_with_the_spec_named(spec, message):
    assert Defense.check(spec) is not None
    with pytest.raises(TabreconError, match=message) as e:
        Defense.parse(spec)
    assert repr(spec) in str(e.value)


def test_protect_returns_the_release_with_its_cost(county):
    none = Defense.parse("none").protect(county)
    assert none.records is county and none.measurements is None and none.cost is None
    sw = Defense.parse("swap=0.2").protect(county, 3)
    assert sw.info["kind"] == "swap" and len(sw.records) == len(county)
    again = Defense.parse("swap=0.2").protect(county, 3)
    assert (again.records.block == sw.records.block).all()  # swapping is seeded
    td = Defense.parse("rho=1e6").protect(county)
    assert td.cost == PrivacyCost.zcdp(1e6) and td.measurements is not None
    assert td.info["rho"] == 1e6 and len(td.records) == len(county)


def test_privacy_costs_are_one_type():
    g, lap = discrete_gaussian(0.5), discrete_laplace(1.0)
    assert g.cost == PrivacyCost.zcdp(0.5)
    assert lap.cost == PrivacyCost.pure(1.0) and lap.cost.delta == 0.0
    both = PrivacyCost.zcdp(0.5) + PrivacyCost.zcdp(1.5)
    assert both.rho == 2.0 and both.epsilon == PrivacyCost.zcdp(2.0).epsilon
    assert (PrivacyCost.pure(1.0) + PrivacyCost.pure(2.0)).epsilon == 3.0

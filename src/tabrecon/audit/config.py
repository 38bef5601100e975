"""The audit's configuration: defaults for every step, read from TOML, every key and value checked.

A config file holds any of these sections (all optional; missing keys keep their defaults)::

    [run]        seed, workers, scheduler, chunk_persons, retries
    [reconstruct] levels, solver, time_limit
    [certify]    enabled, distance, distance_time_limit
    [reidentify] attacker, francis_threshold
    [defenses]   specs, noisy_measurement_attack
    [report]     small_cell_threshold, title

An unknown section or key, or a value of the wrong type or outside its allowed set, is an
:class:`~tabrecon.errors.ConfigError` naming the file, the key and what is allowed.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from ..defenses.defense import Defense
from ..defenses.mechanisms import Noise
from ..errors import TabreconError
from ..vocab import Level


class ConfigError(TabreconError):
    """A configuration key that does not exist or a value it cannot take."""


@dataclass(frozen=True)
class RunConfig:
    seed: int = 2010
    workers: int = 1  # processes for tracts (ignored when a scheduler is given)
    scheduler: str = ""  # tcp://HOST:PORT of a dask.distributed scheduler; "" = local
    chunk_persons: int = 1_000_000  # whole counties are batched up to this many persons
    retries: int = 1  # a failed tract is retried this many times before it is reported


@dataclass(frozen=True)
class ReconstructConfig:
    levels: tuple[str, ...] = ("block", "block+tract")
    solver: str = "auto"  # HiGHS to reconstruct, CP-SAT to certify (engine.solvers.AUTO_BACKEND)
    time_limit: float = 300.0  # seconds per solver call, as `tabrecon reconstruct`


@dataclass(frozen=True)
class CertifyConfig:
    enabled: bool = True
    distance: bool = True
    # seconds per block's distance maximisation (bounds kept on time-out); 0 = the solver's limit
    distance_time_limit: float = 0.0


@dataclass(frozen=True)
class ClaimsConfig:
    """Verified claims about persons (Generate-then-Verify over the person tables) at the
    certification's level: who the release singles out, with tables alone as with records."""

    enabled: bool = True
    # solutions generated per tract for the blocks that can differ: more solutions leave fewer
    # false candidates to refute one search at a time (claims of three synthetic counties,
    # 3,000 / 20,000 / 20,000 persons, 2026-11-30: K = 20 13.6 / 16.0 / 162.9 s, K = 40
    # 5.5 / 13.5 / 98.3 s, K = 80 5.0 / 14.7 / 76.4 s; the same claims verified)
    k_solutions: int = 40


@dataclass(frozen=True)
class ReidentifyConfig:
    attacker: str = "perfect"
    francis_threshold: int = 5


@dataclass(frozen=True)
class DefensesConfig:
    specs: tuple[str, ...] = ("swap-lo", "dhc2023-like")
    noisy_measurement_attack: bool = True  # also fit records to TopDown's noisy measurements
    # where TopDown's noise comes from: "secure" (OpenDP's cryptographic sampler, as a release
    # needs: every run draws anew) or "seeded" (from run.seed: the same run repeats exactly)
    noise: str = "secure"
    # each randomized defense protects the records this many times (seeds seed, seed + 1, ...):
    # the report gives each of its figures as the median and range over the draws
    draws: int = 1


@dataclass(frozen=True)
class HouseholdsConfig:
    """Generate-then-Verify on housing-unit tables (``audit --households FILE`` or
    ``audit --schema households``)."""

    k_values: tuple[int, ...] = (5, 6, 7, 8, 9, 10)  # columns per claim (the study's Table 2)
    k_solutions: int = 20  # solutions generated per block (the study: 100)
    # seconds per block, its reconstruction and proof included; claims verified before are kept
    block_time_limit: float = 60.0
    blocks: int = 50  # the blocks nearest the median size (the study's sample); 0 = every block
    # a person audit's housing units: claims verified given the person tables of the same blocks
    # too (SF1 publishes both; tabrecon.attacks.joint), as an attacker holding the release would
    with_person_tables: bool = True
    # what would have stopped it: the sampled blocks published under each of these rules and
    # attacked as published (tabrecon.metrics.publication_sweep; e.g. ["exact", "round:3",
    # "suppress:3"]); empty: no sweep. Records audits only (a release is published already)
    publication_rules: tuple[str, ...] = ()


@dataclass(frozen=True)
class ReportConfig:
    small_cell_threshold: int = 10  # counts below this are marked in the report
    title: str = "tabrecon disclosure audit"
    # block shapes of the release's county (TIGER/Line tabblock zip, shapefile, GeoPackage,
    # GeoJSON, GeoParquet): the report maps its blocks; "" = no map (needs the maps extra)
    shapes: str = ""
    # a calibration.csv that tabrecon calibrate wrote: an audit of the 2020 DHC gives its
    # claims' measured truth rate beside them; "" = not measured
    calibration: str = ""


@dataclass(frozen=True)
class AuditConfig:
    run: RunConfig = field(default_factory=RunConfig)
    reconstruct: ReconstructConfig = field(default_factory=ReconstructConfig)
    certify: CertifyConfig = field(default_factory=CertifyConfig)
    claims: ClaimsConfig = field(default_factory=ClaimsConfig)
    reidentify: ReidentifyConfig = field(default_factory=ReidentifyConfig)
    defenses: DefensesConfig = field(default_factory=DefensesConfig)
    households: HouseholdsConfig = field(default_factory=HouseholdsConfig)
    report: ReportConfig = field(default_factory=ReportConfig)

    def to_dict(self) -> dict[str, dict[str, Any]]:
        return {f.name: asdict(getattr(self, f.name)) for f in fields(self)}

    def to_toml(self) -> str:
        """The configuration as TOML (what ``--config`` reads back)."""
        lines = []
        for sec, vals in self.to_dict().items():
            lines.append(f"[{sec}]")
            for k, v in vals.items():
                lines.append(f"{k} = {_toml_value(v)}")
            lines.append("")
        return "\n".join(lines)


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'


SOLVERS = ("auto", "cpsat", "highs")
NOISES = Noise.choices()
MAX_DRAWS = 50
ATTACKERS = ("perfect", "commercial", "commercial-2010")


def _validate(cfg: AuditConfig, where: str) -> None:
    def bad(key: str, got: Any, allowed: str) -> ConfigError:
        return ConfigError(f"{where}: {key} = {got!r} is not allowed; {allowed}")

    r = cfg.run
    if r.workers < 1:
        raise bad("run.workers", r.workers, "use a whole number >= 1")
    if r.chunk_persons < 1:
        raise bad("run.chunk_persons", r.chunk_persons, "use a whole number >= 1")
    if r.retries < 0:
        raise bad("run.retries", r.retries, "use a whole number >= 0")
    if r.scheduler and not r.scheduler.startswith(("tcp://", "tls://", "inproc://", "ws://")):
        raise bad(
            "run.scheduler",
            r.scheduler,
            'give a scheduler address such as tcp://127.0.0.1:8786, or ""',
        )
    levels = Level.choices()
    if not cfg.reconstruct.levels or any(lv not in levels for lv in cfg.reconstruct.levels):
        raise bad(
            "reconstruct.levels",
            list(cfg.reconstruct.levels),
            f"allowed values: {', '.join(Level.choices())}",
        )
    if cfg.reconstruct.solver not in SOLVERS:
        raise bad(
            "reconstruct.solver", cfg.reconstruct.solver, f"allowed values: {', '.join(SOLVERS)}"
        )
    if not cfg.reconstruct.time_limit > 0:
        raise bad("reconstruct.time_limit", cfg.reconstruct.time_limit, "use seconds > 0")
    dtl = cfg.certify.distance_time_limit
    if not (math.isfinite(dtl) and dtl >= 0):
        raise bad("certify.distance_time_limit", dtl, "use seconds >= 0 (0: the solver's limit)")
    if not 1 <= cfg.defenses.draws <= MAX_DRAWS:
        raise bad("defenses.draws", cfg.defenses.draws, f"use a whole number 1 to {MAX_DRAWS}")
    if cfg.defenses.noise not in NOISES:
        raise bad("defenses.noise", cfg.defenses.noise, f"allowed values: {', '.join(NOISES)}")
    if cfg.reidentify.attacker not in ATTACKERS:
        raise bad(
            "reidentify.attacker",
            cfg.reidentify.attacker,
            f"allowed values: {', '.join(ATTACKERS)}",
        )
    if cfg.reidentify.francis_threshold < 1:
        raise bad(
            "reidentify.francis_threshold",
            cfg.reidentify.francis_threshold,
            "use a whole number >= 1",
        )
    for s in cfg.defenses.specs:
        msg = Defense.check(s)
        if msg:
            raise bad("defenses.specs", s, msg)
    if len(set(cfg.defenses.specs)) != len(cfg.defenses.specs):
        raise bad("defenses.specs", list(cfg.defenses.specs), "list each defense once")
    h = cfg.households
    if not h.k_values or any(not 1 <= k <= 10 for k in h.k_values):
        raise bad("households.k_values", list(h.k_values), "use numbers of columns in 1..10")
    if h.k_solutions < 1:
        raise bad("households.k_solutions", h.k_solutions, "use a whole number >= 1")
    if not (math.isfinite(h.block_time_limit) and h.block_time_limit > 0):
        raise bad("households.block_time_limit", h.block_time_limit, "use seconds > 0")
    if h.blocks < 0:
        raise bad("households.blocks", h.blocks, "use a whole number >= 0 (0: every block)")
    if cfg.report.small_cell_threshold < 0:
        raise bad(
            "report.small_cell_threshold",
            cfg.report.small_cell_threshold,
            "use a whole number >= 0",
        )


def _coerce(section: str, key: str, value: Any, default: Any, where: str) -> Any:
    name = f"{section}.{key}"
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: {name} = {value!r} is not allowed; use true or false")
        return value
    if isinstance(default, int):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where}: {name} = {value!r} is not allowed; use a whole number")
        return value
    if isinstance(default, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{where}: {name} = {value!r} is not allowed; use a number")
        return float(value)
    if isinstance(default, tuple) and default and all(isinstance(x, int) for x in default):
        if isinstance(value, int) and not isinstance(value, bool):
            value = [value]
        ok = isinstance(value, list) and value
        if not ok or not all(isinstance(x, int) and not isinstance(x, bool) for x in value):
            raise ConfigError(
                f"{where}: {name} = {value!r} is not allowed; use a list of whole numbers"
            )
        return tuple(value)
    if isinstance(default, tuple):
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
            raise ConfigError(f"{where}: {name} = {value!r} is not allowed; use a list of strings")
        return tuple(value)
    if not isinstance(value, str):
        raise ConfigError(f"{where}: {name} = {value!r} is not allowed; use a string")
    return value


def config_from_dict(data: dict[str, Any], where: str = "config") -> AuditConfig:
    """Overlay ``data`` (sections of keys) on the defaults; every key and value checked."""
    cfg = AuditConfig()
    sections = {f.name: f for f in fields(AuditConfig)}
    for sec, vals in data.items():
        if sec not in sections:
            raise ConfigError(
                f"{where}: unknown section [{sec}]; allowed sections: {', '.join(sections)}"
            )
        if not isinstance(vals, dict):
            raise ConfigError(f"{where}: [{sec}] must be a table of keys")
        current = getattr(cfg, sec)
        allowed = {f.name for f in fields(current)}
        changes = {}
        for k, v in vals.items():
            if k not in allowed:
                raise ConfigError(
                    f"{where}: unknown key {sec}.{k}; allowed keys in [{sec}]: "
                    f"{', '.join(sorted(allowed))}"
                )
            changes[k] = _coerce(sec, k, v, getattr(current, k), where)
        cfg = replace(cfg, **{sec: replace(current, **changes)})
    _validate(cfg, where)
    return cfg


def load_config(path: str | Path | None = None, **overrides: dict[str, Any]) -> AuditConfig:
    """Defaults, then the TOML file at ``path`` (if any), then ``overrides`` (section -> keys)."""
    data: dict[str, Any] = {}
    where = "config"
    if path is not None:
        p = Path(path)
        where = str(p)
        if not p.exists():
            raise ConfigError(f"{p}: file not found")
        from ..errors import InputError
        from ..io import check_readable

        try:
            check_readable(p, text=True)
        except InputError as exc:
            raise ConfigError(f"{exc} (a TOML configuration is expected)") from None
        try:
            data = tomllib.loads(p.read_text(encoding="utf-8-sig"))  # a UTF-8 BOM is fine
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{p}: not valid TOML: {exc}") from None
    for sec, vals in overrides.items():
        data.setdefault(sec, {}).update({k: v for k, v in vals.items() if v is not None})
    return config_from_dict(data, where)

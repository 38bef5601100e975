"""One county, several releases: the county-level figures of finished audits side by side, with
their maps (issue 89 item 5), such as the 2010 SF1 and the 2020 DHC audits of the same county.

Each audit is read from the folder ``tabrecon audit --out`` wrote (``summary.json``, and the
``maps.html`` it keeps where it drew maps); nothing is computed again, so every figure is the
one its own report gives. Per audit: the release and what its records are, the records and
blocks, the blocks whose tables admit one population (certified), the records singled out by
verified claims, and the claims' truth rate where a calibration measured it
(``audit --calibration``).

>>> import json, tempfile
>>> d = Path(tempfile.mkdtemp())
>>> for name, release, unique in (("a10", "sf1-2010", 25), ("a20", "dhc-2020", 31)):
...     (d / name).mkdir()
...     _ = (d / name / "summary.json").write_text(json.dumps({
...         "release": release, "noun": "persons", "persons": 3010, "blocks": 44,
...         "inhabited_blocks": 44, "input": {"microdata": "p.csv"},
...         "certify": {"unique_blocks": unique, "inhabited_blocks": 44, "level": "block"}}))
>>> runs = [read_audit(d / "a10"), read_audit(d / "a20")]
>>> figures(runs).row(3)
('blocks whose tables admit one population', '25 of 44 (56.8%)', '31 of 44 (70.5%)')
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from ..errors import InputError
from ..vocab import Release
from .page import fmt_pct, input_text, write_page


@dataclass(frozen=True)
class AuditRun:
    """A finished audit as its folder holds it: the folder, its summary and its maps (None
    where it drew none)."""

    folder: Path
    summary: dict[str, Any]
    maps: str | None

    @property
    def heading(self) -> str:
        """The audit's column heading: its release and records (``2020 DHC: persons``)."""
        release = Release(self.summary.get("release", Release.SF1_2010))
        return f"{release.label}: {self.summary.get('noun', 'persons')}"


def read_audit(folder: Path) -> AuditRun:
    """The audit ``tabrecon audit --out`` wrote to ``folder``; refused naming the folder when it
    holds no finished audit."""
    path = Path(folder) / "summary.json"
    if not path.is_file():
        raise InputError(
            "no summary.json: not the --out folder of a finished tabrecon audit", path=str(folder)
        )
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"not an audit's summary: {exc}", path=str(path)) from None
    if not isinstance(summary, dict) or "persons" not in summary or "blocks" not in summary:
        raise InputError("not an audit's summary: no records or blocks", path=str(path))
    maps = Path(folder) / "maps.html"
    return AuditRun(
        Path(folder), summary, maps.read_text(encoding="utf-8") if maps.is_file() else None
    )


def _of(part: int | None, whole: int | None) -> str:
    if part is None or not whole:
        return "n/a"
    return f"{part:,} of {whole:,} ({fmt_pct(100.0 * part / whole)}%)"


def _singled_out(s: dict[str, Any]) -> str:
    """The records singled out by verified claims: every block's (persons), or the verified
    singleton claims of a population's sampled blocks."""
    claims = s.get("claims")
    if claims and claims.get("persons") is not None:
        return _of(claims.get("persons_singled_out"), claims.get("persons"))
    gtv = s.get(str(s.get("gtv", "")))
    if isinstance(gtv, dict) and "verified_singletons" in gtv:
        return (
            f"{gtv['verified_singletons']:,} singleton claims on {gtv.get('blocks', 0):,} sampled "
            f"{s.get('geography', 'block')}s"
        )
    return "not attacked"


def _truth_rate(s: dict[str, Any]) -> str:
    cal = s.get("calibration")
    if not cal or not cal.get("verified"):
        return "not measured"
    return f"{fmt_pct(100.0 * cal['true'] / cal['verified'])}% of {cal['verified']:,} (simulated)"


def figures(runs: list[AuditRun]) -> pl.DataFrame:
    """The county-level figures of each audit: a row per figure, a column per audit."""

    def column(s: dict[str, Any]) -> list[str]:
        c = s.get("certify") or {}
        return [
            input_text(s.get("input") or {}, markup=False) or "n/a",
            f"{s['persons']:,} {s.get('noun', 'persons')}",
            f"{s['blocks']:,} ({s.get('inhabited_blocks', 0):,} inhabited)",
            _of(c.get("unique_blocks"), c.get("inhabited_blocks")),
            _singled_out(s),
            _truth_rate(s),
        ]

    rows = [
        "input",
        "records",
        "blocks",
        "blocks whose tables admit one population",
        "records singled out by verified claims",
        "verified claims true of the people",
    ]
    data: dict[str, list[str]] = {"figure": rows}
    for i, run in enumerate(runs):
        data[f"{run.heading} ({i + 1})" if _repeats(runs, run) else run.heading] = column(
            run.summary
        )
    return pl.DataFrame(data)


def _repeats(runs: list[AuditRun], run: AuditRun) -> bool:
    return sum(r.heading == run.heading for r in runs) > 1


def _prefixed(fragment: str, prefix: str) -> str:
    """A map fragment whose ids (and the references to them) are ``prefix``-ed: each audit's
    maps define their own shapes, which must not be taken for another's on one page."""
    fragment = re.sub(r'\bid="', f'id="{prefix}', fragment)
    fragment = fragment.replace('href="#', f'href="#{prefix}')
    return fragment.replace("url(#", f"url(#{prefix}")


def compare_report(folders: list[Path], out: Path) -> Path:
    """Write the audits of ``folders`` side by side to the HTML file ``out``; returns it."""
    runs = [read_audit(Path(f)) for f in folders]
    table = figures(runs)
    head = "".join(f"<th>{html.escape(c)}</th>" for c in table.columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in row) + "</tr>"
        for row in table.iter_rows()
    )
    links = "".join(
        f'<li><a href="{html.escape(str(r.folder / "report.html"))}">{html.escape(r.heading)}'
        f"</a>: <code>{html.escape(str(r.folder))}</code></li>"
        for r in runs
    )
    parts = [
        "<h1>One county, its releases side by side</h1>",
        '<p class="lead">Each column is a finished audit, read from its folder: the figures are '
        "those its own report gives. A block whose tables admit one population gives away every "
        "record in it; a record singled out is one a verified claim (true of every population "
        "the tables allow) describes alone.</p>",
        f'<h2 id="figures">Figures</h2><table><thead><tr>{head}</tr></thead><tbody>{body}'
        "</tbody></table>",
        f"<p>The audits' own reports:</p><ul>{links}</ul>",
    ]
    drawn = [(i, r) for i, r in enumerate(runs) if r.maps]
    if drawn:
        parts.append('<h2 id="maps">Maps</h2>')
        for i, r in drawn:
            assert r.maps is not None
            parts.append(f"<h3>{html.escape(r.heading)}</h3>{_prefixed(r.maps, f'a{i}-')}")
    return write_page(out.parent, "One county, its releases", parts, name=out.name)

"""The report's maps: a county's blocks coloured by what the audit found, as inline SVG.

Two maps of the same blocks (:class:`Layer`): certified uniqueness (one consistent population,
more than one, not decided) and the share of residents singled out by verified claims, with the
tracts outlined and a legend counting blocks and residents per colour. Each block's figures
show on hover (an SVG ``<title>``). The maps are vector drawings inside the HTML: no tile
server, no script, no internet; the report opens offline. Shapes are simplified as a coverage
(shared edges stay shared) to about a thousandth of the county's width.

Each drawn block carries ``data-i``, its row in ``results/blocks.csv``, so that every colour can
be checked against the figures it shows; no block geoid is written into the HTML.

>>> import numpy as np, polars as pl, shapely
>>> from tabrecon.shapes import BlockShapes
>>> sq = lambda x: shapely.box(x, 0, x + 1, 1)
>>> shapes = BlockShapes(np.array(["990010001001000", "990010001001001"]),
...                      np.array([sq(0), sq(1)]), "two.geojson", "GEOID10")
>>> blocks = block_classes(pl.DataFrame({"block_geoid": ["990010001001000"], "persons": [3],
...     "status": ["unique"], "singled_out": [2]}))
>>> blocks.select("uniqueness", "singled_out_class").row(0)
('one consistent population', '50-75%')
>>> svg = block_map(shapes, blocks, Layer.UNIQUENESS)
>>> svg.count("<path"), COLOURS[Layer.UNIQUENESS]["one consistent population"] in svg
(3, True)
"""

from __future__ import annotations

import enum
import html
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import polars as pl

from ..geo import prefix
from ..shapes import BlockShapes
from ..vocab import Verdict


class Layer(enum.StrEnum):
    """What a map colours its blocks by."""

    UNIQUENESS = "uniqueness"
    SINGLED_OUT = "singled_out_class"


#: the class drawn for a block of the shapes with no residents in the audit (uninhabited, or
#: not in the release)
NO_RESIDENTS = "no residents"
#: a block whose certification did not answer (time limit, failure): no claims either
NOT_DECIDED = "not decided"

#: per layer, each class's colour in legend order (ColorBrewer RdBu / Reds, colour-blind safe)
COLOURS: Mapping[Layer, Mapping[str, str]] = {
    Layer.UNIQUENESS: {
        "one consistent population": "#b2182b",
        "more than one": "#92c5de",
        NOT_DECIDED: "#f4a582",
        NO_RESIDENTS: "#f0f0f0",
    },
    Layer.SINGLED_OUT: {
        "75% or more": "#a50f15",
        "50-75%": "#de2d26",
        "25-50%": "#fb6a4a",
        "under 25%": "#fcae91",
        "none": "#fee5d9",
        NOT_DECIDED: "#f4a582",
        NO_RESIDENTS: "#f0f0f0",
    },
}

TITLES = {
    Layer.UNIQUENESS: "Blocks whose published tables admit exactly one population",
    Layer.SINGLED_OUT: "Share of each block's residents singled out by verified claims",
}

#: the map's width in drawing units (coordinates are written as whole units)
WIDTH = 2000


def block_classes(blocks: pl.DataFrame) -> pl.DataFrame:
    """``blocks`` (``block_geoid``, ``persons``, ``status`` as certification wrote it,
    ``singled_out``: null where no claims were computed) with the share singled out and each
    layer's class: the rows of ``results/blocks.csv``."""
    share = pl.when(pl.col("persons") > 0).then(100.0 * pl.col("singled_out") / pl.col("persons"))
    decided = (
        pl.col("status").is_in([Verdict.UNIQUE, Verdict.VARIES])
        & pl.col("singled_out").is_not_null()
    )
    return (
        blocks.sort("block_geoid")
        .with_columns(share.alias("singled_out_pct"))
        .with_columns(
            pl.when(pl.col("persons") == 0)
            .then(pl.lit(NO_RESIDENTS))
            .when(pl.col("status") == Verdict.UNIQUE)
            .then(pl.lit("one consistent population"))
            .when(pl.col("status") == Verdict.VARIES)
            .then(pl.lit("more than one"))
            .otherwise(pl.lit(NOT_DECIDED))
            .alias(Layer.UNIQUENESS.value),
            pl.when(pl.col("persons") == 0)
            .then(pl.lit(NO_RESIDENTS))
            .when(~decided)
            .then(pl.lit(NOT_DECIDED))
            .when(pl.col("singled_out") == 0)
            .then(pl.lit("none"))
            .when(pl.col("singled_out_pct") < 25)
            .then(pl.lit("under 25%"))
            .when(pl.col("singled_out_pct") < 50)
            .then(pl.lit("25-50%"))
            .when(pl.col("singled_out_pct") < 75)
            .then(pl.lit("50-75%"))
            .otherwise(pl.lit("75% or more"))
            .alias(Layer.SINGLED_OUT.value),
        )
    )


def _projector(shapes: BlockShapes):
    """A function from (x, y) arrays to drawing units: longitude scaled by the cosine of the
    middle latitude when the coordinates are degrees, north up, ``WIDTH`` wide."""
    import shapely

    x0, y0, x1, y1 = shapely.total_bounds(shapes.geometry)
    degrees = -180 <= x0 <= x1 <= 180 and -90 <= y0 <= y1 <= 90
    sx = float(np.cos(np.radians((y0 + y1) / 2))) if degrees else 1.0
    scale = WIDTH / max((x1 - x0) * sx, 1e-12)
    height = int(np.ceil((y1 - y0) * scale)) + 1

    def project(xy: np.ndarray) -> np.ndarray:
        return np.column_stack(((xy[:, 0] - x0) * sx * scale, (y1 - xy[:, 1]) * scale))

    return project, height, (x1 - x0) / 1000


def _path(geom, project) -> str:
    """SVG path data of a (Multi)Polygon or (Multi)LineString in whole drawing units; a ring that
    rounds to fewer than 3 distinct points is left out."""
    import shapely

    parts = []
    pieces = shapely.get_parts(geom)
    polygonal = shapely.get_type_id(geom) in (3, 6)
    rings = shapely.get_rings(pieces) if polygonal else pieces  # boundaries are lines
    for r in np.atleast_1d(rings):
        xy = np.rint(project(shapely.get_coordinates(r))).astype(np.int64)
        keep = np.ones(len(xy), dtype=bool)
        keep[1:] = (xy[1:] != xy[:-1]).any(axis=1)
        xy = xy[keep]
        if len(xy) < 3:
            continue
        pts = " ".join(f"{x} {y}" for x, y in xy.tolist())
        parts.append(f"M{pts}Z" if shapely.get_type_id(r) == 2 else f"M{pts}")
    return "".join(parts)


def said(cls: str, noun: str) -> str:
    """A class as a map shows it, for records called ``noun`` (``no residents``: ``no housing
    units`` on a map of housing units)."""
    return cls.replace("residents", noun)


def _hover(row: dict, noun: str, claims: bool) -> str:
    if row["persons"] == 0:
        return f"no {noun}"
    pct = row["singled_out_pct"]
    singled = (
        f"; {row['singled_out']:,} singled out by verified claims ({pct:.1f}%)"
        if row[Layer.SINGLED_OUT.value] != NOT_DECIDED
        else "; claims not computed (certification did not answer)"
    )
    return f"{row['persons']:,} {noun}; {row[Layer.UNIQUENESS.value]}" + (singled if claims else "")


@dataclass(frozen=True)
class Drawing:
    """The geometry of a map, the same for every layer: each drawn block's geoid and path
    data, the tracts' outlines, the drawing's height."""

    blocks: list[tuple[str, str]]
    outlines: str
    height: int


def drawing(shapes: BlockShapes) -> Drawing:
    """Project, simplify (as a coverage) and write ``shapes`` as SVG path data, once."""
    import shapely

    project, height, tolerance = _projector(shapes)
    simple = shapely.coverage_simplify(shapes.geometry, tolerance)
    blocks = [
        (g, d)
        for g, geom in zip(shapes.geoid.tolist(), simple, strict=True)
        if (d := _path(geom, project))
    ]
    tracts = prefix(shapes.geoid, "tract")
    outlines = []
    for t in np.unique(tracts):
        d = _path(shapely.boundary(shapely.coverage_union_all(simple[tracts == t])), project)
        if d:
            outlines.append(f'<path d="{d}" class="tract"/>')
    return Drawing(blocks, "".join(outlines), height)


def block_map(
    shapes: BlockShapes,
    blocks: pl.DataFrame,
    layer: Layer,
    drawn: Drawing | None = None,
    *,
    noun: str = "residents",
    claims: bool = True,
) -> str:
    """One map as an HTML ``<figure>``: every block of ``shapes`` coloured by ``layer``'s class
    in ``blocks`` (the frame of :func:`block_classes`; a block of the shapes not in it has no
    records), tracts outlined, a legend with blocks and records per class. ``drawn``: the
    shapes' :func:`drawing`, when several maps share it; ``noun``: what a block's records are
    called (``housing units``); ``claims``: whether verified claims were computed (a block's
    hover says its share singled out)."""
    drawn = drawn if drawn is not None else drawing(shapes)
    row_of = {g: i for i, g in enumerate(blocks["block_geoid"].to_list())}
    rows = blocks.to_dicts()
    colours = COLOURS[layer]
    paths = []
    for g, d in drawn.blocks:
        i = row_of.get(g)
        if i is None:
            paths.append(
                f'<path d="{d}" fill="{colours[NO_RESIDENTS]}"><title>no {html.escape(noun)} in '
                "the release</title></path>"
            )
            continue
        row = rows[i]
        paths.append(
            f'<path d="{d}" fill="{colours[row[layer.value]]}" data-i="{i}">'
            f"<title>{html.escape(_hover(row, noun, claims))}</title></path>"
        )
    height, outlines = drawn.height, [drawn.outlines]
    svg = (
        f'<svg class="blockmap" viewBox="-10 -10 {WIDTH + 20} {height + 20}" role="img" '
        f'aria-label="{html.escape(said(TITLES[layer], noun))}">'
        f'<g class="blocks">{"".join(paths)}</g><g class="tracts">{"".join(outlines)}</g></svg>'
    )
    return (
        f'<figure class="map" id="map-{layer.value.replace("_", "-")}">{svg}'
        f"<figcaption>{html.escape(said(TITLES[layer], noun))}. "
        f"{legend(blocks, shapes, layer, noun=noun)}"
        "</figcaption></figure>"
    )


def legend(
    blocks: pl.DataFrame, shapes: BlockShapes, layer: Layer, *, noun: str = "residents"
) -> str:
    """The legend of one map: each class's swatch, its blocks and records, called ``noun``
    (blocks of the shapes outside the audit count as having none)."""
    drawn = blocks.filter(pl.col("block_geoid").is_in(shapes.geoid.tolist()))
    counts = {
        r[layer.value]: (r["blocks"], r["residents"])
        for r in drawn.group_by(layer.value)
        .agg(pl.len().alias("blocks"), pl.col("persons").sum().alias("residents"))
        .to_dicts()
    }
    outside = len(shapes) - drawn.height
    nb, nr = counts.get(NO_RESIDENTS, (0, 0))
    counts[NO_RESIDENTS] = (nb + outside, nr)
    items = []
    for cls, colour in COLOURS[layer].items():
        b, r = counts.get(cls, (0, 0))
        if not b:
            continue
        items.append(
            f'<li><span class="swatch" style="background:{colour}"></span>'
            f"{html.escape(said(cls, noun))}: {b:,} block{'s' if b != 1 else ''}"
            + (f", {r:,} {html.escape(noun)}" if cls != NO_RESIDENTS else "")
            + "</li>"
        )
    return f'<ul class="maplegend">{"".join(items)}</ul>'


def draw_maps(
    shapes: BlockShapes,
    blocks: pl.DataFrame,
    singled_out: bool = True,
    *,
    noun: str = "residents",
) -> str:
    """Both maps side by side (the singled-out one only when claims were computed), of a
    block's records called ``noun`` (persons: ``residents``; ``housing units``)."""
    layers = [Layer.UNIQUENESS] + ([Layer.SINGLED_OUT] if singled_out else [])
    drawn = drawing(shapes)  # the geometry once, for both
    maps = "".join(
        block_map(shapes, blocks, lay, drawn, noun=noun, claims=singled_out) for lay in layers
    )
    return f'<div class="maps">{maps}</div>'


#: the maps' style, added to the report's stylesheet
CSS = (
    "figure.map{margin:0}"
    "svg.blockmap{width:100%;height:auto;background:#fff;border:1px solid #ccc}"
    ".maps{display:grid;grid-template-columns:repeat(auto-fit,minmax(520px,1fr));gap:1em}"
    "svg.blockmap .blocks path{stroke:#fff;stroke-width:.5px;vector-effect:non-scaling-stroke}"
    "svg.blockmap .blocks path:hover{stroke:#000;stroke-width:2px}"
    "svg.blockmap .tract{fill:none;stroke:#333;stroke-width:1.5px;vector-effect:non-scaling-stroke;"
    "pointer-events:none}"
    "ul.maplegend{list-style:none;padding:0;display:flex;flex-wrap:wrap;gap:.4em 1.4em}"
    ".swatch{display:inline-block;width:1em;height:1em;margin-right:.35em;"
    "vertical-align:-.15em;border:1px solid #999}"
)


__all__ = [
    "COLOURS",
    "CSS",
    "NOT_DECIDED",
    "NO_RESIDENTS",
    "Layer",
    "block_classes",
    "block_map",
    "draw_maps",
    "said",
]

"""The report's maps: a county's blocks coloured by what the audit found, as inline SVG.

Two maps of the same blocks (:class:`Layer`): certified uniqueness (one consistent population,
more than one, not decided) and the share of residents singled out by verified claims, with the
tracts outlined and a legend counting blocks and residents per colour. Each block's figures
show on hover (an SVG ``<title>``). The maps are vector drawings inside the HTML: no tile
server, no script, no internet; the report opens offline. Shapes are simplified as a coverage
(shared edges stay shared) to about a thousandth of the county's width.

The geometry is written once, in the page's ``<defs>``; each map, and each zoomed inset of a
dense tract, draws it again by ``<use>``. A block's shape is ``#b<i>``, ``i`` its row in
``results/blocks.csv``, so that every colour can be checked against the figures it shows; no
block geoid is written into the HTML. The first map's blocks say their figures on hover (both
maps': the second's would only repeat them and double the page).

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
#: a tract is drawn again, zoomed, when its box is under this share of the map's width
DENSE_SHARE = 0.1
#: at most this many tracts are zoomed, those with the most blocks
DENSE_TRACTS = 3


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
    """SVG path data of a (Multi)Polygon or (Multi)LineString in whole drawing units, each ring
    its first point and then relative steps; a ring that rounds to fewer than 3 distinct points
    is left out."""
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
        # the first point absolute, then steps (SVG "l"): short numbers, the same whole units
        steps = " ".join(f"{x} {y}" for x, y in np.diff(xy, axis=0).tolist())
        end = "z" if shapely.get_type_id(r) == 2 else ""
        parts.append(f"M{xy[0, 0]} {xy[0, 1]}l{steps}{end}")
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
        f"; {row['singled_out']:,} singled out ({pct:.0f}%)"  # by verified claims: the legend
        if row[Layer.SINGLED_OUT.value] != NOT_DECIDED
        else "; claims not computed (certification did not answer)"
    )
    return f"{row['persons']:,} {noun}; {row[Layer.UNIQUENESS.value]}" + (singled if claims else "")


@dataclass(frozen=True)
class Drawing:
    """The geometry of a map, the same for every layer: each drawn block's geoid and path
    data, the tracts' outlines, the drawing's height, and each tract's blocks and bounding box
    in drawing units (x, y, width, height), for the insets of dense tracts."""

    blocks: list[tuple[str, str]]
    outlines: str
    height: int
    tracts: dict[str, tuple[int, tuple[int, int, int, int]]]

    def ids(self, blocks: pl.DataFrame) -> list[str]:
        """Each drawn block's id in the page: ``b<i>`` for row ``i`` of ``blocks`` (the rows of
        ``results/blocks.csv``, so the id says which row a shape draws), ``n<k>`` for a shape
        with no records in the audit."""
        row_of = {g: i for i, g in enumerate(blocks["block_geoid"].to_list())}
        return [f"b{row_of[g]}" if g in row_of else f"n{k}" for k, (g, _) in enumerate(self.blocks)]

    def defs(self, blocks: pl.DataFrame) -> str:
        """The geometry once, as an invisible SVG's ``<defs>``: each block by its :meth:`ids`,
        the tract outlines as ``#tracts``; every map and inset draws it by ``<use>``."""
        ids = self.ids(blocks)
        paths = "".join(
            f'<path id="{i}" d="{d}"/>' for i, (_, d) in zip(ids, self.blocks, strict=True)
        )
        return (
            '<svg class="mapdefs" width="0" height="0" aria-hidden="true"><defs>'
            f'{paths}<g id="tracts">{self.outlines}</g></defs></svg>'
        )

    def dense(self, most: int = DENSE_TRACTS) -> list[tuple[str, tuple[int, int, int, int]]]:
        """Up to ``most`` tracts too small to read on the county's map (their box under
        :data:`DENSE_SHARE` of its width), most blocks first: each drawn again zoomed."""
        small = [
            (n, t, box)
            for t, (n, box) in self.tracts.items()
            if max(box[2], box[3]) < DENSE_SHARE * WIDTH and n >= 10
        ]
        small.sort(key=lambda r: (-r[0], r[1]))
        return [(t, box) for _, t, box in small[:most]]


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
    boxes: dict[str, tuple[int, tuple[int, int, int, int]]] = {}
    for t in np.unique(tracts):
        union = shapely.coverage_union_all(simple[tracts == t])
        d = _path(shapely.boundary(union), project)
        if d:
            # the attribute, not the stylesheet: a zoomed inset's copy keeps its width
            outlines.append(f'<path d="{d}" class="tract" vector-effect="non-scaling-stroke"/>')
            x0, y0, x1, y1 = shapely.bounds(union)
            (a, b), (c, e) = np.rint(project(np.array([[x0, y1], [x1, y0]]))).astype(int)
            boxes[str(t)] = (int((tracts == t).sum()), (a, b, max(c - a, 1), max(e - b, 1)))
    return Drawing(blocks, "".join(outlines), height, boxes)


def block_map(
    shapes: BlockShapes,
    blocks: pl.DataFrame,
    layer: Layer,
    drawn: Drawing | None = None,
    *,
    noun: str = "residents",
    claims: bool = True,
    hover: bool = True,
) -> str:
    """One map as an HTML ``<figure>``: every block of ``shapes`` coloured by ``layer``'s class
    in ``blocks`` (the frame of :func:`block_classes`; a block of the shapes not in it has no
    records), tracts outlined, a legend with blocks and records per class, and its dense tracts
    zoomed. ``drawn``: the shapes' :func:`drawing` when several maps share it, whose
    :meth:`Drawing.defs` the page then holds once (without it, the map carries its own);
    ``noun``: what a block's records are called (``housing units``); ``claims``: whether
    verified claims were computed (a block's hover says its share singled out); ``hover``:
    whether each block says its figures when pointed at (the first of several maps does, for
    all: the page stays small)."""
    own = drawn is None
    drawn = drawn if drawn is not None else drawing(shapes)
    rows = blocks.to_dicts()
    colours = COLOURS[layer]
    empty = html.escape(f"no {noun} in the release")
    uses = []
    for name in drawn.ids(blocks):
        row = rows[int(name[1:])] if name[0] == "b" else None
        fill = colours[NO_RESIDENTS if row is None else row[layer.value]]
        if not hover:  # the map beside the one that says each block's figures
            uses.append(f'<use href="#{name}" fill="{fill}"/>')
            continue
        said_here = empty if row is None else html.escape(_hover(row, noun, claims))
        uses.append(f'<use href="#{name}" fill="{fill}"><title>{said_here}</title></use>')
    name = f"layer-{layer.value.replace('_', '-')}"
    label = html.escape(said(TITLES[layer], noun))
    svg = (
        f'<svg class="blockmap" viewBox="-10 -10 {WIDTH + 20} {drawn.height + 20}" role="img" '
        f'aria-label="{label}"><g class="blocks" id="{name}">{"".join(uses)}</g>'
        '<g class="tracts"><use href="#tracts"/></g></svg>'
    )
    return (
        f'<figure class="map" id="map-{layer.value.replace("_", "-")}">'
        f"{drawn.defs(blocks) if own else ''}{svg}"
        f"<figcaption>{label}. {legend(blocks, shapes, layer, noun=noun)}</figcaption>"
        f"{_insets(drawn, name, label)}</figure>"
    )


def _insets(drawn: Drawing, layer_id: str, label: str) -> str:
    """The dense tracts of a map, each zoomed to its box: the map's own layer again by
    ``<use>`` (no geometry repeated), in a row under it."""
    out = []
    for tract, (x, y, w, h) in drawn.dense():
        pad = max(w, h) // 20 + 1
        box = f"{x - pad} {y - pad} {w + 2 * pad} {h + 2 * pad}"
        name = f"tract {int(tract[5:9])}" + (f".{tract[9:11]}" if tract[9:11] != "00" else "")
        out.append(
            f'<figure class="inset" data-tract="{tract}"><svg class="blockmap" viewBox="{box}" '
            f'role="img" aria-label="{label}: {name}, zoomed"><use href="#{layer_id}"/>'
            '<g class="tracts"><use href="#tracts"/></g></svg>'
            f"<figcaption>{name}, {WIDTH * 1.0 / max(w, h):.0f}x</figcaption></figure>"
        )
    return f'<div class="insets">{"".join(out)}</div>' if out else ""


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
    drawn = drawing(shapes)  # the geometry once, for both, in one <defs>
    maps = "".join(
        block_map(shapes, blocks, lay, drawn, noun=noun, claims=singled_out, hover=lay == layers[0])
        for lay in layers
    )
    return f'{drawn.defs(blocks)}<div class="maps">{maps}</div>'


#: the maps' style, added to the report's stylesheet
CSS = (
    "figure.map{margin:0}"
    "svg.blockmap{width:100%;height:auto;background:#fff;border:1px solid #ccc}"
    ".maps{display:grid;grid-template-columns:repeat(auto-fit,minmax(520px,1fr));gap:1em}"
    "svg.mapdefs{position:absolute;width:0;height:0;overflow:hidden}"
    "svg.mapdefs path{vector-effect:non-scaling-stroke}"
    "svg.blockmap .blocks use{stroke:#fff;stroke-width:.5px}"
    "svg.blockmap .blocks use:hover{stroke:#000;stroke-width:2px}"
    "svg.blockmap .tracts{fill:none;stroke:#333;stroke-width:1.5px;pointer-events:none}"
    ".insets{display:flex;flex-wrap:wrap;gap:.6em}"
    "figure.inset{margin:0;width:240px}figure.inset figcaption{font-size:.85em}"
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

"""A county to map from real published tables: the real sample's tracts laid on Guernsey
County's TIGER/Line blocks.

The real sample (``../shared/data/census2010_rhdf_28tracts.csv.gz``) holds 28 tracts of several
states; the one county whose block shapes are at hand is Guernsey County, Ohio (39059, 10 tracts).
This script gives each Guernsey tract, largest first, the real tract with the most blocks that
still fit in it, and each of that tract's blocks a Guernsey block geoid of that tract, in order.
The tables (tabulated from the real records, which the Bureau reconstructed from its published
2010 tables) are real; the pairing of their blocks with Guernsey's shapes is made up, so the map
shows real tables on real shapes but not where those people live. Guernsey blocks left over have
no residents in this county.

Run (from the repository root):
python examples/maps/real_tables_on_tiger.py [--tracts 10] -o county.csv
tabrecon audit --tables county.csv --shapes ../shared/data/tiger/tl_2010_39059_tabblock10.zip
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import polars as pl

from tabrecon.geo import prefix

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
SAMPLE = DATA / "census2010_rhdf_28tracts.csv.gz"
TIGER = DATA / "tiger" / "tl_2010_39059_tabblock10.zip"


def borrow(records: pl.DataFrame, shape_geoids: np.ndarray, tracts: int = 10) -> pl.DataFrame:
    """``records`` (a person file with ``block_geoid``) with their blocks renamed onto
    ``shape_geoids``' blocks: at most ``tracts`` shape tracts (largest first), each given the
    unused real tract with the most blocks that fit; records of real tracts not chosen are
    dropped."""
    shape = np.sort(np.asarray(shape_geoids, dtype=str))
    s_tract = prefix(shape, "tract")
    st, sn = np.unique(s_tract, return_counts=True)
    real = records["block_geoid"].unique().sort().to_numpy().astype(str)
    r_tract = prefix(real, "tract")
    rt, rn = np.unique(r_tract, return_counts=True)
    free = dict(zip(rt.tolist(), rn.tolist(), strict=True))
    rename: dict[str, str] = {}
    for t in st[np.argsort(-sn, kind="stable")][:tracts].tolist():
        room = int((s_tract == t).sum())
        fits = [(n, r) for r, n in free.items() if n <= room]
        if not fits:
            continue
        _, r = max(fits)
        del free[r]
        ours = real[r_tract == r]
        rename.update(zip(ours.tolist(), shape[s_tract == t][: len(ours)].tolist(), strict=True))
    return records.filter(pl.col("block_geoid").is_in(list(rename))).with_columns(
        pl.col("block_geoid").replace_strict(rename)
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tracts", type=int, default=10)
    ap.add_argument("-o", "--out", type=Path, default=Path("county.csv"))
    args = ap.parse_args()
    from tabrecon.shapes import read_shapes

    recs = pl.read_csv(SAMPLE, schema_overrides={"block_geoid": pl.String})
    moved = borrow(recs, read_shapes(TIGER).geoid, args.tracts)
    persons = args.out.with_name(args.out.stem + "_persons.csv")
    moved.write_csv(persons)
    import subprocess
    import sys

    subprocess.run(
        [sys.executable, "-c", "from tabrecon.entry import main; main()", "tabulate"]
        + [str(persons), "--tables", "published", "-o", str(args.out)],
        check=True,
    )
    print(f"{moved.height:,} persons in {moved['block_geoid'].n_unique():,} blocks -> {args.out}")


if __name__ == "__main__":
    main()

"""Write src/tabrecon/data/identities/<schema>.tsv.gz: the consistency identities of every
schema the package declares, derived from its tables (tabrecon.tables.consistency), so no
process derives them again (seconds for SF1's person tables, more for the housing tables). A
test fails until the files match the declarations. Run: python scripts/vendor_identities.py"""

from __future__ import annotations

from pathlib import Path

from tabrecon.schema import registry
from tabrecon.tables.consistency import VENDORED, vendor_identities

OUT = Path(__file__).resolve().parent.parent / "src" / "tabrecon" / VENDORED


def main() -> None:
    for name in registry.names():
        path = vendor_identities(registry.population(name), OUT)
        print(f"{path}: {path.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()

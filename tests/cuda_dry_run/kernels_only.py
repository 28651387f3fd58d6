"""Keeps the compiled CUDA kernels of dry runs, and nothing else, in one cache file.

    python3 tests/cuda_dry_run/kernels_only.py OUT.db DRY_RUN_FOLDER...

Each dry-run job leaves Burn's cache database (cubecl's environment, SQLite) under
`<job>/cache/gpu/default.db`. Its `cuda/…` and `cuda-second-line/…` namespaces hold the PTX
NVRTC made, keyed by kernel and by the Ember binary's build ID; the rest is not portable:
the autotune answers there were timed on a stand-in that computes nothing (and cubecl keys
them by runtime, not by GPU model, so a real GPU would take them), and the throughput probes
name the stand-in. OUT.db, put at `$EMBER_CACHE_DIR/gpu/default.db` before the same binary
runs on a real GPU of that architecture, spares it NVRTC's compile: the driver only loads
the PTX. A different binary (another build ID) finds none of it and compiles as usual.
"""

import sqlite3
import sys
from pathlib import Path

KEPT = ("cuda/", "cuda-second-line/")


def main() -> int:
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    out = Path(sys.argv[1])
    sources = [db for folder in sys.argv[2:] for db in Path(folder).glob("**/gpu/default.db")]
    if not sources:
        print(f"no cache database under {sys.argv[2:]}", file=sys.stderr)
        return 1
    out.unlink(missing_ok=True)
    kept = sqlite3.connect(out)
    first = sqlite3.connect(f"file:{sources[0]}?mode=ro", uri=True)
    tables = "SELECT sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
    for (sql,) in first.execute(tables):
        kept.execute(sql)
    kept.executemany("INSERT INTO meta VALUES (?, ?)", first.execute("SELECT k, v FROM meta"))
    first.close()
    for source in sources:
        db = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
        rows = db.execute(
            "SELECT namespace, key, value, origin FROM entries WHERE "
            + " OR ".join("namespace LIKE ?" for _ in KEPT),
            [prefix + "%" for prefix in KEPT],
        )
        kept.executemany("INSERT OR IGNORE INTO entries VALUES (?, ?, ?, ?)", rows)
        db.close()
    kept.commit()
    for namespace, count, size in kept.execute(
        "SELECT namespace, count(*), sum(length(value)) FROM entries GROUP BY namespace"
    ):
        print(f"{namespace}: {count} entries, {size / 2**20:.1f} MiB")
    kept.execute("VACUUM")
    kept.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Whether the embedded engine takes a SurrealKV memtable size from the store's URL.

    python bench/engine/engine_memtable_probe.py [DIR]

SurrealDB 3 reads SurrealKV's sizes (``surrealkv_max_memtable_size``,
``surrealkv_block_cache_capacity``, ...) from a configuration map, and sizes them from the
machine's memory when they are not given. This writes about 21 MB of rows into a fresh store
opened three ways (plain; with ``?surrealkv_max_memtable_size=1048576`` in the URL; with
``SURREAL_SURREALKV_MAX_MEMTABLE_SIZE=1048576`` in the environment of a child process) and
counts the SSTable files on disk before closing. A 1 MiB memtable taken into account would be
flushed to SSTables many times over; none at all means the setting did not reach the engine.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from surrealdb import AsyncSurreal

ROWS_SQL = ("FOR $i IN 0..2000 {"
            " CREATE doc CONTENT { text: string::repeat('abc def ', 50) + <string>$i } };")


async def write(url: str, directory: Path) -> str:
    db = AsyncSurreal(url)
    await db.connect()
    await db.use("probe", "probe")
    started = time.perf_counter()
    for _ in range(20):
        await db.query(ROWS_SQL)
    seconds = time.perf_counter() - started
    sstables = directory / "sstables"
    before_close = len(list(sstables.iterdir())) if sstables.exists() else 0
    await db.close()
    return f"{url}: 40,000 rows in {seconds:.1f} s, SSTables before closing: {before_close}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dir", nargs="?", type=Path,
                        help="a new folder for the three stores (default: a temporary one)")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(asyncio.run(write(f"surrealkv://{args.child}", args.child)), flush=True)
        os._exit(0)
    root = args.dir or Path(tempfile.mkdtemp(prefix="memtable-"))
    plain, query = root / "plain", root / "query"
    print(asyncio.run(write(f"surrealkv://{plain}", plain)), flush=True)
    print(asyncio.run(write(f"surrealkv://{query}?surrealkv_max_memtable_size=1048576", query)),
          flush=True)
    env = {**os.environ, "SURREAL_SURREALKV_MAX_MEMTABLE_SIZE": "1048576"}
    child = subprocess.run([sys.executable, __file__, "--child", str(root / "env")], env=env,
                           capture_output=True, text=True, check=False)
    print("SURREAL_SURREALKV_MAX_MEMTABLE_SIZE=1048576 " + child.stdout.strip())
    os._exit(0)  # the embedded engine can abort while the interpreter tears down


if __name__ == "__main__":
    main()

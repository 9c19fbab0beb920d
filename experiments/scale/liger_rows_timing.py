"""Time importing a Liger CSV of N rows (MAX_CSV_ROWS in harness/core/files.py).

Usage: python experiments/scale/liger_rows_timing.py N
Repeats the rows of ../shared/data/liger-a100-vs-h100/a100_all_benchmark_data.csv
up to N data rows in a temporary file, imports it, prints rows, bytes, seconds,
series and the first error (the row-limit line when N > MAX_CSV_ROWS).
"""

import sys
import tempfile
import time
from pathlib import Path

from harness.store import importers

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT.parent / "shared" / "data" / "liger-a100-vs-h100" / "a100_all_benchmark_data.csv"


def main() -> None:
    if len(sys.argv) != 2 or not sys.argv[1].isdigit():
        raise SystemExit("usage: python experiments/scale/liger_rows_timing.py N  (N data rows, a positive integer)")
    n = int(sys.argv[1])
    head, *rows = SRC.read_text().splitlines()
    out = [head] + [rows[i % len(rows)] for i in range(n)]
    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / f"liger_{n}.csv"
        p.write_text("\n".join(out) + "\n")
        t = time.perf_counter()
        rs = importers.load_liger_csvs([p])
        dt = time.perf_counter() - t
        print(f"{n} rows, {p.stat().st_size:,} bytes: {dt:.2f} s, {len(rs.series)} series; {rs.errors[:1]}")


if __name__ == "__main__":
    main()

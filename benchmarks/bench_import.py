"""Import time: ``import helpers`` against ``import torch``, each in a fresh interpreter, in one run.

``import helpers`` loads its floors, and with them torch and transformers, on first use
(``helpers.model.lazy``), so it should cost a small fraction of ``import torch``. First use then pays for
what it needs: the third line times ``import helpers`` followed by reading ``helpers.capture`` (torch and
transformers' model code), which any session that loads a model pays once. Best of a few fresh interpreters
each (the first run of a cold disk cache is the slowest); the ratios are measured in this one run. No timed
asserts: timings depend on the machine (``tests/test_lazy.py`` checks what ``import helpers`` imports).

Run from the repository root: .venv/bin/python benchmarks/bench_import.py [--repeats N]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

# Each statement runs in a fresh interpreter, timed there: interpreter start-up is not counted.
TIMED = """
import time
start = time.perf_counter()
{statement}
print(time.perf_counter() - start)
"""
STATEMENTS = {
    "import torch": "import torch",
    "import helpers": "import helpers",
    "import helpers; helpers.capture": "import helpers; helpers.capture",
}


def seconds(statement: str) -> float:
    """Wall time of ``statement`` in a fresh interpreter (one thread, as the book's tests run)."""
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    done = subprocess.run(
        [sys.executable, "-c", TIMED.format(statement=statement)], capture_output=True, text=True, env=env, check=True
    )
    return float(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="fresh interpreters per statement (best of)")
    args = parser.parse_args()
    for statement in STATEMENTS.values():  # warm the disk cache: the first import of a cold cache is an outlier
        seconds(statement)
    best = {name: min(seconds(s) for _ in range(args.repeats)) for name, s in STATEMENTS.items()}
    torch_time = best["import torch"]
    print(f"best of {args.repeats} fresh interpreters each")
    print(f"{'statement':<36} {'seconds':>8} {'/ import torch':>15}")
    for name, value in best.items():
        print(f"{name:<36} {value:>8.3f} {value / torch_time:>15.3f}")


if __name__ == "__main__":
    main()

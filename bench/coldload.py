"""`python -m bench.coldload FILE`: in this fresh process, time `import dsl` and the first and
second `Policy.load(FILE)`; print them as JSON (milliseconds). Used by bench.load."""

from __future__ import annotations

import json
import sys
import time


def main() -> None:
    path = sys.argv[1]
    t0 = time.perf_counter()
    from dsl import Policy

    t1 = time.perf_counter()
    Policy.load(path)
    t2 = time.perf_counter()
    Policy.load(path)
    t3 = time.perf_counter()
    print(json.dumps({
        "import_ms": round((t1 - t0) * 1000, 2),
        "first_load_ms": round((t2 - t1) * 1000, 2),
        "second_load_ms": round((t3 - t2) * 1000, 2),
    }))


if __name__ == "__main__":
    main()

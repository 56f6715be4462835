"""A live function whose line table is longer than a code snapshot's copy
(32 KB, bpf/pyprof.h PYPROF_CODE_LT_MAX), for tests/test_short_lived.py:
big() runs 8,000 one-line statements (~40 KB of table), then spins for
SECONDS in a loop on its last three lines. Its code object lives all along,
so the whole table is there to read: the loop's samples must have its lines.

    python big_linetable.py [SECONDS]

Prints "LINES a b c" (the loop's lines) on stderr first.
"""
import sys
import time

STATEMENTS = 8000
SECONDS = float(sys.argv[1]) if len(sys.argv) > 1 else 2.0
src = ("def big(seconds):\n" + "".join(f"    v{j} = {j}\n" for j in range(STATEMENTS)) +
       "    t = time.monotonic() + seconds\n"
       "    while time.monotonic() < t:\n"
       "        pass\n")
ns = {"time": time}
exec(compile(src, "<big linetable>", "exec"), ns)
print("LINES", STATEMENTS + 2, STATEMENTS + 3, STATEMENTS + 4, file=sys.stderr, flush=True)
ns["big"](SECONDS)

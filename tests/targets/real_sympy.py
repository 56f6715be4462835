"""sympy doing algebra and calculus on small expressions, over and over.

    python real_sympy.py SECONDS

Every iteration (with sympy's caches cleared, so the work is done again):
expand a power of a sum, factor a polynomial, simplify a trigonometric
expression, integrate and differentiate, solve a quadratic, a few terms of a
series (Debian's python3-sympy, on python3-mpmath; pure Python). Prints
"ready" on stdout when the loop starts; exits 0 after SECONDS.
"""
import os
import random
import sys
import time

import sympy
from sympy.core.cache import clear_cache

x, y, z = sympy.symbols("x y z")


def iteration(rng, i):
    k = rng.randint(3, 6)
    a, b = rng.randint(1, 9), rng.randint(1, 9)
    e = sympy.expand((x + a * y + z + i % 7) ** k)
    f = sympy.factor(x ** (k + 2) - b ** (k + 2))
    s = sympy.simplify(sympy.sin(a * x) ** 2 + sympy.cos(a * x) ** 2 + (x ** 2 - 1) / (x - 1))
    g = sympy.integrate(x ** k * sympy.exp(b * x) + sympy.sin(a * x) * x, x)
    d = sympy.diff(g, x, 2)
    r = sympy.solve(a * x ** 2 + b * x - k, x)
    t = sympy.series(sympy.cos(a * x) / (1 + x), x, 0, 5)
    return len(str(e)) + len(str(f)) + len(str(s)) + len(str(d)) + len(r) + len(str(t))


def main():
    seconds = float(sys.argv[1])
    rng = random.Random(3)
    deadline = time.monotonic() + seconds
    print("ready", flush=True)
    i = n = 0
    while time.monotonic() < deadline:
        i += 1
        clear_cache()
        n += iteration(rng, i)
    print(f"{i} iterations, {n}", file=sys.stderr)
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()

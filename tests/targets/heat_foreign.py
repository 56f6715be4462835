"""Code that names a file its user may not read as its own (tests/test_views_html.py).

argv: PATH SECONDS. Run as an unprivileged user: compiles a hot function
under the file name PATH (a root-only host file), prints "ready", runs it
for SECONDS and prints "ok". The profiler must not copy PATH's text.
"""
import os
import sys
import time

SRC = "def spin(n):\n    return sum([i * i for i in range(n)])\n"


def main():
    path, secs = sys.argv[1], float(sys.argv[2])
    ns = {}
    exec(compile(SRC, path, "exec"), ns)
    print("ready", os.getpid(), flush=True)
    t0 = time.time()
    while time.time() - t0 < secs:
        ns["spin"](20000)
    print("ok", flush=True)


main()

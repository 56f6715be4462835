"""-a target (tests/test_all.py): forks N children one after another; each
spins a little, then execs this Python on a short loop, and is waited for.

    python all_forker.py N
"""
import os
import sys


def child():
    x = 0
    for k in range(200000):
        x += k
    os.execv(sys.executable, [sys.executable, "-c", "x = 0\nfor i in range(300000): x += i"])


for _ in range(int(sys.argv[1])):
    pid = os.fork()
    if pid == 0:
        child()
    os.waitpid(pid, 0)

"""`agent` target (tests/test_agent.py): burns CPU in burn_a() until killed.

    python agent_burn.py STATE

Once it burns, it writes STATE: "PID X.Y.Z" (its pid and Python version).
SIGUSR1 switches it to burn_b(); once burn_b() has had 0.25 s of this
thread's CPU time it writes STATE.b, and burns in burn_b() on. Files are
written with os calls only (no Python-level I/O code in its stacks) and
renamed into place, so a reader never sees half of one.
"""
import os
import signal
import sys
import time

SWITCHED = False


def on_usr1(signum, frame):
    global SWITCHED
    SWITCHED = True


def put(path, text):
    fd = os.open(path + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, text.encode())
    os.close(fd)
    os.rename(path + ".tmp", path)


def burn_a():
    x = 0
    for i in range(3000):
        x += i
    return x


def burn_b():
    x = 0
    for i in range(3000):
        x += i
    return x


def main(state):
    signal.signal(signal.SIGUSR1, on_usr1)
    put(state, "%d %d.%d.%d" % ((os.getpid(),) + tuple(sys.version_info[:3])))
    while not SWITCHED:
        burn_a()
    t0 = time.thread_time()
    while time.thread_time() - t0 < 0.25:
        burn_b()
    put(state + ".b", "%d" % os.getpid())
    while True:
        burn_b()


main(sys.argv[1])

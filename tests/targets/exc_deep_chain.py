"""A handler around a chain of DEPTH generators (yield from), the innermost
spinning (tests/test_exception_mode.py, issue #38): the exception stack
holds DEPTH empty items above the handler's. argv: DEPTH SECONDS.
Prints "ready" once the chain is built. Each yield unwinds the chain to the
handler's loop and its next() builds it again, which takes milliseconds at
this depth (a look then sees a shorter chain, or none yet): the innermost
spins half a second between yields, so that a look finds it whole but
rarely."""
import sys
import threading
import time

sys.setrecursionlimit(4 * int(sys.argv[1]))
threading.stack_size(256 << 20)
built = threading.Event()


def spin(t=0.5):
    end = time.monotonic() + t
    while time.monotonic() < end:
        pass


def deep_gen(depth):
    if depth <= 1:
        built.set()
        while True:
            spin()
            yield 1
    else:
        yield from deep_gen(depth - 1)


def p_deep():
    try:
        raise KeyError("outer")
    except KeyError:
        for _ in deep_gen(int(sys.argv[1])):
            pass


threading.Thread(target=p_deep, name="deep", daemon=True).start()
built.wait()
print("ready", flush=True)
time.sleep(float(sys.argv[2]))

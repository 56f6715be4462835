"""-a target (tests/test_all.py): spins in spin() until killed, or for
SECONDS when given.

    python all_spin.py [SECONDS]
"""
import sys
import time

END = time.monotonic() + float(sys.argv[1]) if len(sys.argv) > 1 else None


def spin():
    while END is None or time.monotonic() < END:
        x = 0
        for i in range(2000):
            x += i


spin()

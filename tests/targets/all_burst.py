"""-a target (tests/test_all.py, bounded images): spins in burst() for 0.3 s,
then sleeps 1.5 s, and again, until killed: idle long enough between bursts
for its image to be evicted, then sampled again.

    python all_burst.py
"""
import time


def burst():
    end = time.monotonic() + 0.3
    while time.monotonic() < end:
        x = 0
        for i in range(2000):
            x += i


while True:
    burst()
    time.sleep(1.5)

"""A target for tests/test_blocking.py: counts every real-time signal it is
sent, one by one, while its threads run.

SIGRTMIN has a handler, and signal.set_wakeup_fd() makes the C-level
handler write a byte into a pipe per signal caught (Python's own handler
calls coalesce; the bytes do not). Two threads spin; the main thread reads
commands from stdin: "count" prints how many signals were caught so far.
Prints "ready" once the threads spin.
"""
import os
import signal
import sys
import threading

r, w = os.pipe()
os.set_blocking(w, False)
os.set_blocking(r, False)
signal.signal(signal.SIGRTMIN, lambda *_: None)
signal.set_wakeup_fd(w, warn_on_full_buffer=True)


def spin():
    x = 0
    while True:
        for i in range(1000):
            x += i * i
        x &= 0xffff


for _ in range(2):
    threading.Thread(target=spin, daemon=True).start()
print("ready", flush=True)
caught = 0
for line in sys.stdin:
    try:
        while True:
            caught += sum(1 for b in os.read(r, 65536) if b == signal.SIGRTMIN)
    except BlockingIOError:
        pass
    if line.strip() == "count":
        print(caught, flush=True)

"""A quiet target: a thread and the main thread sleep forever.

    python sleeper.py READY

Writes READY (atomically) once both are about to sleep. Runs on CPython 3.8+.
"""
import os
import sys
import threading
import time

READY = sys.argv[1]


def sleep_forever():
    while True:
        time.sleep(3600)


def main():
    threading.Thread(target=sleep_forever, name="sleeper", daemon=True).start()
    with open(READY + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.replace(READY + ".tmp", READY)
    sleep_forever()


if __name__ == "__main__":
    main()

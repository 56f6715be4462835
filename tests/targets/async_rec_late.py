"""record --async target: runs without asyncio for a while (3.14 maps its
_asyncio module only when asyncio is imported), then imports it and runs a
named task burning CPU.

    python async_rec_late.py READY_FILE GO_FILE

Writes READY_FILE at once, spins until GO_FILE exists, then starts asyncio.
"""
import os
import sys
import time

READY, GO = sys.argv[1], sys.argv[2]
with open(READY, "w") as f:
    f.write("ready\n")
while not os.path.exists(GO):
    time.sleep(0.01)

import asyncio  # noqa: E402


def burn(n):
    s = 0
    for i in range(n):
        s += i * i
    return s


async def late_work():
    while True:
        burn(3000)
        await asyncio.sleep(0)


async def main():
    await asyncio.create_task(late_work(), name="late")


asyncio.run(main())

"""record --async target (tests/test_async_chains.py): a chain of N tasks
(default 300), each awaiting the next, the innermost burning CPU.

    python async_deep_chain.py READY_FILE [N]

The main task (renamed "main") awaits lvl-1; task lvl-k runs level(k),
which awaits a new task lvl-(k+1) running level(k+1); lvl-N runs burn()
for ever (it never yields: the chain stays as it is). READY_FILE is written
by lvl-N just before it starts burning.
"""
import asyncio
import os
import sys

READY = sys.argv[1]
N = int(sys.argv[2]) if len(sys.argv) > 2 else 300


def burn():
    s = 0
    while True:
        for i in range(1000):
            s += i * i


async def level(k):
    if k < N:
        await asyncio.create_task(level(k + 1), name=f"lvl-{k + 1}")
        return
    with open(READY + ".tmp", "w") as f:
        f.write(f"{os.getpid()}\n")
    os.rename(READY + ".tmp", READY)
    burn()


async def main():
    asyncio.current_task().set_name("main")
    await asyncio.create_task(level(1), name="lvl-1")


asyncio.run(main())

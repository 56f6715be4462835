"""Deep awaits. Usage: async_chain.py READY_FILE MODE [N] (N: 2,000)
  tasks: a chain of N + 1 tasks, each awaiting the next (link-1 awaits
         link-2 ... link-N sleeps)
  coro:  one task ("deep") whose coroutine awaits a coroutine N deep (deep(N)
         awaits deep(N - 1) ... deep(0) sleeps)"""
import asyncio
import os
import sys

MODE = sys.argv[2]
N = int(sys.argv[3]) if len(sys.argv) > 3 else 2000
sys.setrecursionlimit(4 * N + 1000)


async def link(i):
    if i == N:
        await asyncio.sleep(3600)
    else:
        await asyncio.create_task(link(i + 1), name=f"link-{i + 1}")


async def deep(n):
    if n == 0:
        await asyncio.sleep(3600)
    else:
        await deep(n - 1)


async def main(path):
    if MODE == "tasks":
        asyncio.create_task(link(0), name="link-0")
        want = N + 2
    else:
        asyncio.create_task(deep(N), name="deep")
        want = 2
    while len(asyncio.all_tasks()) < want:
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.2)
    with open(path + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.rename(path + ".tmp", path)
    await asyncio.sleep(3600)


asyncio.run(main(sys.argv[1]))

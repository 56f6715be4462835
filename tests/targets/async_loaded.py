"""A loaded server: N long-lived tasks (default 10,000) while the event loop
never idles. Half of them wake constantly (short sleeps, a little work), the
rest wait on an event, on a future, in a TaskGroup or under a gather, so
that chains of tasks awaiting tasks are there too. No task starts or ends
after the ready file is written: every dump must list all N + 1 (main).
Usage: async_loaded.py READY_FILE [N]."""
import asyncio
import os
import sys


async def busy(i):
    # wakes every 0-3 ms, does a little work: the loop always has work
    n = 0
    while True:
        await asyncio.sleep((i % 4) / 1000)
        n += sum(range(i % 50))


async def idle(ev):
    await ev.wait()


async def on_future(fut):
    await fut


async def group_child(i, ev):
    await ev.wait()


async def grouped(g, k, ev):
    async with asyncio.TaskGroup() as tg:
        for j in range(k):
            tg.create_task(group_child(j, ev), name=f"g{g}-c{j}")


async def gathered(g, k, ev):
    kids = [asyncio.create_task(group_child(j, ev), name=f"h{g}-c{j}") for j in range(k)]
    await asyncio.gather(*kids)


async def main(n, path):
    ev = asyncio.Event()
    fut = asyncio.get_running_loop().create_future()
    made = 0
    # a tenth in TaskGroups and a tenth under gathers: 1 parent + 9 children
    groups = n // 100
    for g in range(groups):
        asyncio.create_task(grouped(g, 9, ev), name=f"g{g}")
        asyncio.create_task(gathered(g, 9, ev), name=f"h{g}")
        made += 20
    rest = n - made
    for i in range(rest):
        if i % 2 == 0:
            asyncio.create_task(busy(i), name=f"b{i}")
        elif i % 4 == 1:
            asyncio.create_task(idle(ev), name=f"i{i}")
        else:
            asyncio.create_task(on_future(fut), name=f"f{i}")
    await asyncio.sleep(0.3)
    with open(path + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.rename(path + ".tmp", path)
    await fut


asyncio.run(main(int(sys.argv[2]) if len(sys.argv) > 2 else 10000, sys.argv[1]))

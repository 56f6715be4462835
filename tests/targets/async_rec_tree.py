"""record --async target (tests/test_async_record.py): a fixed tree of
asyncio tasks, every leaf task burning CPU in burn() between yields.

    python async_rec_tree.py READY_FILE

  main (the asyncio.run task, renamed "main") gathers:
    parent   (named)  -> a TaskGroup of tg-0, tg-1 (named): tg_worker
    Task-N x 2 (unnamed, made by gather from coroutines): gather_child
    waiter   (named)  -> asyncio.wait_for(spin_for()): runs in waiter itself
    sa, sb   (named)  -> both await one task, shared (named): shared_fn
READY_FILE gets the tasks' names once all of them run, then a line naming
whichever of sa and sb has the lower id() (its address: the awaiter a
profiler follows when several await one task).
"""
import asyncio
import os
import sys

READY = sys.argv[1]


def burn(n):
    s = 0
    for i in range(n):
        s += i * i
    return s


async def leaf(tag):
    while True:
        burn(3000)
        await asyncio.sleep(0)


async def tg_worker(k):
    await leaf(f"tg-{k}")


async def parent():
    async with asyncio.TaskGroup() as tg:
        for k in range(2):
            tg.create_task(tg_worker(k), name=f"tg-{k}")


async def gather_child(k):
    await leaf(f"g-{k}")


async def spin_for():
    await leaf("waiter")


async def waiter():
    await asyncio.wait_for(spin_for(), timeout=1e6)


async def shared_fn():
    await leaf("shared")


async def awaiting(t):
    await t


async def announce(sa, sb):
    await asyncio.sleep(0.2)
    names = sorted(t.get_name() for t in asyncio.all_tasks())
    with open(READY + ".tmp", "w") as f:
        f.write(" ".join(names) + "\n")
        f.write(("sa" if id(sa) < id(sb) else "sb") + "\n")
    os.rename(READY + ".tmp", READY)


async def main():
    asyncio.current_task().set_name("main")
    p = asyncio.create_task(parent(), name="parent")
    w = asyncio.create_task(waiter(), name="waiter")
    shared = asyncio.create_task(shared_fn(), name="shared")
    sa = asyncio.create_task(awaiting(shared), name="sa")
    sb = asyncio.create_task(awaiting(shared), name="sb")
    asyncio.create_task(announce(sa, sb), name="announce")
    await asyncio.gather(p, gather_child(0), gather_child(1), w, sa, sb)


asyncio.run(main())

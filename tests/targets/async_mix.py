"""asyncio tasks of every kind test_asyncio.py compares with `python -m asyncio
ps` and `pstree`: named and unnamed tasks, a task awaiting a task, a method
coroutine, asyncio.wait_for on a coroutine and on a gather, TaskGroup
children, gather children, tasks of a second thread's loop, and a task left
pending by a thread that ended (it moves to the interpreter's list).

Usage: async_mix.py READY_FILE. Writes READY_FILE once every task is
suspended where it stays, then sleeps until killed."""
import asyncio
import os
import sys
import threading

keep = []


async def leaf(n):
    await asyncio.sleep(3600)


async def mid(n):
    await leaf(n)


async def waiter(t):
    await t


class Worker:
    async def run(self, n):
        await leaf(n)


async def timed(n):
    await asyncio.wait_for(mid(n), 3600)


def thread_loop(started):
    async def side():
        t = asyncio.create_task(mid(20), name="side-child")
        started.set()
        await t
    asyncio.run(side())


def thread_ended():
    loop = asyncio.new_event_loop()

    async def start():
        keep.append(asyncio.create_task(mid(30), name="orphan"))
        await asyncio.sleep(0.05)
    loop.run_until_complete(start())
    keep.append(loop)       # not closed: the task stays pending


def ready(path):
    with open(path + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.rename(path + ".tmp", path)


async def main(path):
    t = asyncio.create_task(mid(1), name="worker-1")
    asyncio.create_task(waiter(t), name="waiter")
    asyncio.create_task(mid(3))
    asyncio.create_task(Worker().run(4), name="method")
    asyncio.create_task(timed(5), name="timed")
    async with asyncio.TaskGroup() as tg:
        tg.create_task(mid(6), name="tg-child")
        tg.create_task(leaf(7))
        g = asyncio.gather(mid(8), leaf(9))
        started = threading.Event()
        threading.Thread(target=thread_loop, args=(started,), daemon=True).start()
        started.wait()
        th = threading.Thread(target=thread_ended)
        th.start()
        th.join()
        await asyncio.sleep(0.3)
        ready(path)
        await asyncio.wait_for(g, 3600)


asyncio.run(main(sys.argv[1]))

#!/usr/bin/env python3
"""A 3.14+ asyncio target for fuzz seeds: named tasks awaiting each other
(gather, a TaskGroup, an async generator, a non-ASCII name), stopped from
inside the running task. Prints PID MINOR RUNTIME CODE_TYPE CORO_TYPE
ASYNCGEN_TYPE (tests/fuzz/support/fake_target.h)."""
import asyncio, ctypes, os, signal, sys, types

async def leaf(ev):
    await ev.wait()

async def agen(ev):
    yield 1
    await leaf(ev)
    yield 2

async def through_agen(ev):
    async for _ in agen(ev):
        pass

async def group(ev):
    async with asyncio.TaskGroup() as tg:
        tg.create_task(leaf(ev), name="tâche-日本")
        tg.create_task(through_agen(ev), name="agen")

async def main():
    ev = asyncio.Event()
    ts = [asyncio.create_task(group(ev), name="group"),
          asyncio.create_task(asyncio.gather(leaf(ev), leaf(ev)) and leaf(ev))]
    await asyncio.sleep(0.05)
    rt = ctypes.addressof(ctypes.c_char.in_dll(ctypes.pythonapi, "_PyRuntime"))
    print(os.getpid(), sys.version_info[1], hex(rt), hex(id(types.CodeType)),
          hex(id(types.CoroutineType)), hex(id(types.AsyncGeneratorType)), flush=True)
    os.kill(os.getpid(), signal.SIGSTOP)
    ev.set()
    await asyncio.gather(*ts)

asyncio.run(main())

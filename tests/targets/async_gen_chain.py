"""record --async target (tests/test_async_chains.py): tasks awaiting
through async generators, the innermost burning CPU.

    python async_gen_chain.py READY_FILE

  main (renamed "main") gathers two tasks:
    consumer: `async for` over feed(), an async generator whose step awaits
              the task "burner-a" (burner(): burn() for ever);
    closer:   `await g.aclose()` of an async generator whose finally awaits
              the task "burner-b";
READY_FILE is written once both burners have been scheduled; the two then
take turns: each burns ~2 ms and sleeps 0 between rounds.
"""
import asyncio
import os
import sys

READY = sys.argv[1]
started = set()


def burn():
    s = 0
    for i in range(20000):
        s += i * i
    return s


async def burner(tag):
    started.add(tag)
    if len(started) == 2:
        with open(READY + ".tmp", "w") as f:
            f.write(f"{os.getpid()}\n")
        os.rename(READY + ".tmp", READY)
    while True:
        burn()
        await asyncio.sleep(0)


async def feed():
    yield await asyncio.create_task(burner("a"), name="burner-a")


async def consumer():
    async for _ in feed():
        pass


async def closing():
    try:
        yield 1
    finally:
        await asyncio.create_task(burner("b"), name="burner-b")


async def closer():
    g = closing()
    await anext(g)
    await g.aclose()


async def main():
    asyncio.current_task().set_name("main")
    await asyncio.gather(asyncio.create_task(consumer(), name="consumer"),
                         asyncio.create_task(closer(), name="closer"))


asyncio.run(main())

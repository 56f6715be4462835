"""Tasks running and awaiting async generators: `async for`, anext() (with
and without a default), asend(), athrow(), aclose(), an async generator
iterating another, tasks made from anext() and aclose() awaitables, and two
tasks running inside an async generator's step (one per thread, the second
made from an anext() awaitable). Every quiet task waits in asyncio.sleep
(3600) on a fixed line. Usage: async_gens.py READY_FILE."""
import asyncio
import os
import sys
import threading


async def ticker():
    while True:
        await asyncio.sleep(3600)
        yield 1


async def closing():
    try:
        yield 1
    finally:
        await asyncio.sleep(3600)


async def echo():
    while True:
        got = yield
        await asyncio.sleep(3600)
        yield got


async def catcher():
    while True:
        try:
            yield 1
        except ValueError:
            await asyncio.sleep(3600)


async def inner_gen():
    while True:
        await asyncio.sleep(3600)
        yield 1


async def outer_gen():
    async for x in inner_gen():
        yield x


async def consumer():
    async for _ in ticker():
        pass


async def anext_user():
    await anext(ticker())


async def anext_default_user():
    await anext(ticker(), None)


async def closer():
    g = closing()
    await anext(g)
    await g.aclose()


async def asender():
    g = echo()
    await anext(g)
    await g.asend(5)


async def thrower():
    g = catcher()
    await anext(g)
    await g.athrow(ValueError())


async def nested():
    async for _ in outer_gen():
        pass


def work(n):
    s = 0
    for i in range(n):
        s += i
    return s


def spin():
    while True:
        work(100000)


async def spinning_gen(path, other):
    other.wait()
    with open(path + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.rename(path + ".tmp", path)
    spin()
    yield 1


async def spinner(path, other):
    await asyncio.sleep(0.3)
    async for _ in spinning_gen(path, other):
        pass


async def signalling_gen(ready):
    ready.set()
    spin()
    yield 1


async def side(ready):
    await asyncio.create_task(anext(signalling_gen(ready)), name="anext-spinner")


async def main(path):
    tasks = [asyncio.create_task(f(), name=f.__name__)
             for f in (consumer, anext_user, anext_default_user, closer, asender,
                       thrower, nested)]
    tasks.append(asyncio.create_task(anext(ticker()), name="anext-task"))
    g = closing()
    await anext(g)
    tasks.append(asyncio.create_task(g.aclose(), name="aclose-task"))
    other = threading.Event()
    threading.Thread(target=asyncio.run, args=(side(other),), daemon=True).start()
    tasks.append(asyncio.create_task(spinner(path, other), name="spinner"))
    await asyncio.gather(*tasks)


asyncio.run(main(sys.argv[1]))

"""A target whose asyncio tasks are hostile while it is sampled (issue #23,
the hostile-target suite).

    python hostile_async.py READY STOP LIFETIME

Four tasks take turns on one event loop, each burning ~50 ms of CPU in a
plain loop inside its coroutine (so the BPF backend, which samples threads
on a CPU, sees it) before it yields:
  - "cycler" (coroutine spin_task_cycle): while it burns, by turns, it is
    awaited by itself, or by "partner" which it awaits (3.14+:
    asyncio.future_add_to_awaited_by, the public API, does not refuse a task
    awaiting itself; the links are taken back before it yields). Before
    3.14 a task keeps no link to its awaiters, so there is nothing to loop.
  - "waiter" awaits a future that never completes; while "cycler" burns,
    waiter's _fut_waiter points at waiter itself instead of the future
    (ctypes: the field is found by scanning the C task object's words for
    id(the future): exactly one may match; restored before cycler yields,
    and never read by the loop meanwhile: only cancel() and the wakeup
    would). Every version with the C Task (3.11+).
  - a task whose name is a 100 MB str (coroutine spin_big_name);
  - "clean" (coroutine spin_clean): nothing odd, it must show named.
The garbage collector is disabled (a collection would walk the tasks).

When STOP exists (or LIFETIME seconds passed) the tasks end, the target
checks the loop still works (the waiter is cancelled and its cancellation
seen, a gather of fresh tasks returns), prints "ok CHECKSUM", exits 0.
"""
import asyncio
import ctypes
import gc
import os
import sys
import time

READY, STOP = sys.argv[1], sys.argv[2]
LIFETIME = float(sys.argv[3])
SPIN = 0.05
HDR = object.__basicsize__
u64 = ctypes.c_uint64
perf_counter = time.perf_counter
add_awaiter = getattr(asyncio, "future_add_to_awaited_by", None)
discard_awaiter = getattr(asyncio, "future_discard_from_awaited_by", None)
BIG_NAME = "N" * 100_000_000
STATE = {}


def stopping(deadline):
    return os.path.exists(STOP) or time.monotonic() > deadline


async def spin_task_cycle(deadline):
    me = asyncio.current_task()
    partner, waiter_slot, waiter = STATE["partner"], STATE["slot"], STATE["waiter"]
    links = [[(me, me)], [(me, partner), (partner, me)]]
    n = 0
    while not stopping(deadline):
        end = perf_counter() + SPIN
        # by turns: awaited by itself; awaited by partner, which it awaits
        pairs = links[n % 2] if add_awaiter else []
        n += 1
        for fut, waiter_task in pairs:
            add_awaiter(fut, waiter_task)
        saved = waiter_slot.value
        waiter_slot.value = id(waiter)
        try:
            while perf_counter() < end:
                pass
        finally:
            waiter_slot.value = saved
            for fut, waiter_task in pairs:
                discard_awaiter(fut, waiter_task)
        await asyncio.sleep(0)


async def spin_big_name(deadline):
    while not stopping(deadline):
        end = perf_counter() + SPIN
        while perf_counter() < end:
            pass
        await asyncio.sleep(0)


async def spin_clean(deadline):
    while not stopping(deadline):
        end = perf_counter() + SPIN / 2
        while perf_counter() < end:  # LINE:clean
            pass
        await asyncio.sleep(0)


async def park(fut):
    await fut


async def idle(deadline):
    while not stopping(deadline):
        await asyncio.sleep(0.01)


def fut_waiter_slot(task, fut):
    """The C task's _fut_waiter field, holding id(fut) now."""
    if not type(task).__module__ == "_asyncio":
        raise SystemExit(f"not the C Task: {type(task)}")
    hits = [i for i in range(HDR // 8, type(task).__basicsize__ // 8) if u64.from_address(id(task) + 8 * i).value == id(fut)]
    if len(hits) != 1:
        raise SystemExit(f"cannot find _fut_waiter: {hits}")
    return u64.from_address(id(task) + 8 * hits[0])


async def main():
    deadline = time.monotonic() + LIFETIME
    never = asyncio.get_running_loop().create_future()
    waiter = asyncio.create_task(park(never), name="waiter")
    await asyncio.sleep(0.01)
    STATE["waiter"] = waiter
    STATE["slot"] = fut_waiter_slot(waiter, never)
    STATE["partner"] = asyncio.create_task(idle(deadline), name="partner")
    tasks = [asyncio.create_task(spin_task_cycle(deadline), name="cycler"),
             asyncio.create_task(spin_big_name(deadline), name=BIG_NAME),
             asyncio.create_task(spin_clean(deadline), name="clean")]
    await asyncio.sleep(0.2)
    with open(READY + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.replace(READY + ".tmp", READY)
    # the cycler and partner are not gathered: while the run lasts their
    # only awaiters are the links above (a chain from the cycler never
    # reaches a root, it loops)
    await asyncio.gather(*tasks[1:])
    await tasks[0]
    await STATE["partner"]
    # still works: the waiter cancels, fresh tasks gather
    waiter.cancel()
    try:
        await waiter
    except asyncio.CancelledError:
        pass
    assert waiter.cancelled()
    assert tasks[1].get_name() == BIG_NAME

    async def sq(i):
        await asyncio.sleep(0)
        return i * i
    return sum(await asyncio.gather(*(sq(i) for i in range(1000))))


if __name__ == "__main__":
    gc.disable()
    total = asyncio.run(main())
    gc.enable()
    gc.collect()
    print(f"ok {total}", flush=True)

# -*- coding: utf-8 -*-
"""A target for `pyprof-bpf dump`: threads in known states, with long names.

    python incident.py OUT.json

Runs on CPython 3.11 to 3.15. Threads, each named with more than 15 bytes:
  incident-spinner-thread-A   spins in pure Python (needs the GIL)
  incident-spinner-thread-B   the same: one of the two waits for the GIL
  incident-collector-thread   calls gc.collect() over a large graph, again
                              and again (holds the GIL while it collects)
  incident-sleeper-thread     in time.sleep()
  incident-lock-waiter-thread blocked in Lock.acquire() on a held lock
  incident-except-thread      in time.sleep() inside an `except` block
  MainThread                  in Event.wait()
Once the parked ones are parked, the target writes OUT.json (tmp + rename):
its pid, each thread's ident, native id, name and role, and for the parked
threads their stacks as traceback.format_stack() prints them, as traceback
prints them with each frame's whole position (the ^^^ markers; innermost
last), those positions, and their innermost frame's own locals as repr()
shows them. The
recorder is the main thread before it parks, so it is not in the dump.
"""
import gc
import json
import os
import sys
import threading
import time
import traceback

OUT = sys.argv[1]
parked = threading.Semaphore(0)
held = threading.Lock()
held.acquire()
forever = threading.Event()


def spin():
    x = 0
    while True:
        x = x + 1


def collect_forever(graph):
    while True:
        gc.collect()


def sleeper(count=3, label="naïve", blob=b"\x00ab\xff"):
    big = 2 ** 100
    neg = -12345678901234567890
    ratio = 1.5
    nothing = None
    flag = True
    text = "x" * 300
    items = [1, 2, 3]
    cellvar = 77
    keep = lambda: cellvar  # noqa: E731 (makes cellvar a cell)
    parked.release()
    slept = [time.sleep(3600 * 24)]
    return slept, big, neg, ratio, nothing, flag, text, items, count, label, blob, keep


def lock_waiter():
    parked.release()
    got = [held.acquire()]
    return got


def except_sleeper():
    try:
        raise ValueError("in flight")
    except ValueError:
        parked.release()
        slept = [time.sleep(3600 * 24)]
        return slept


def make_graph(n):
    # containers in cycles, alive: every collection traverses them
    nodes = [[] for _ in range(n)]
    for i, node in enumerate(nodes):
        node.append(nodes[(i + 1) % n])
    return nodes


def positioned_traceback(frame):
    """The traceback of a suspended frame, printed by traceback with each
    frame's whole position (as an exception's traceback has them; format_stack
    has only lines), outermost first; and the positions, innermost first."""
    summaries, positions = [], []
    f = frame
    while f is not None:
        pos = list(f.f_code.co_positions())[f.f_lasti // 2]
        positions.append(list(pos))
        summaries.append(traceback.FrameSummary(
            f.f_code.co_filename, pos[0], f.f_code.co_name, end_lineno=pos[1],
            colno=pos[2], end_colno=pos[3]))
        f = f.f_back
    summaries.reverse()
    return traceback.StackSummary.from_list(summaries).format(), positions


def main_wait():
    forever.wait()


def publish(rec, main_ident):
    seen = None
    while True:
        f = sys._current_frames()[main_ident]
        now = (f.f_code.co_name, f.f_lineno, f.f_back and f.f_back.f_code.co_name)
        if now == seen and now[0] == "wait":
            break
        seen = now
        time.sleep(0.2)
    with open(OUT + ".tmp", "w", encoding="utf-8") as fh:
        json.dump(rec, fh)
    os.rename(OUT + ".tmp", OUT)


def main():
    graph = make_graph(400000)
    threads = [
        threading.Thread(target=spin, name="incident-spinner-thread-A", daemon=True),
        threading.Thread(target=spin, name="incident-spinner-thread-B", daemon=True),
        threading.Thread(target=collect_forever, args=(graph,),
                         name="incident-collector-thread", daemon=True),
        threading.Thread(target=sleeper, name="incident-sleeper-thread", daemon=True),
        threading.Thread(target=lock_waiter, name="incident-lock-waiter-thread",
                         daemon=True),
        threading.Thread(target=except_sleeper, name="incident-except-thread",
                         daemon=True),
    ]
    for t in threads:
        t.start()
    for _ in range(3):
        parked.acquire()
    roles = {"incident-spinner-thread-A": "spinner", "incident-spinner-thread-B": "spinner",
             "incident-collector-thread": "gc", "incident-sleeper-thread": "sleeper",
             "incident-lock-waiter-thread": "lock", "incident-except-thread": "except"}
    # parked once two looks 0.2 s apart see the same lines
    lines = None
    while True:
        frames = sys._current_frames()
        now = [frames[t.ident].f_lineno for t in threads[3:]]
        if now == lines:
            break
        lines = now
        time.sleep(0.2)
    rec = {"pid": os.getpid(), "python": "%d.%d.%d" % sys.version_info[:3], "threads": []}
    for t in threads + [threading.main_thread()]:
        entry = {"ident": t.ident, "native_id": t.native_id, "name": t.name,
                 "role": roles.get(t.name, "main")}
        role = entry["role"]
        if role in ("sleeper", "lock", "except"):
            f = frames[t.ident]
            entry["stack"] = traceback.format_stack(f)
            entry["traceback"], entry["positions"] = positioned_traceback(f)
            entry["locals"] = {k: repr(v) for k, v in f.f_locals.items()}
        rec["threads"].append(entry)
    # written once the main thread is parked in main_wait (a thread of its
    # own, gone before the test looks: it is not in the record)
    threading.Thread(target=publish, args=(rec, threading.main_thread().ident),
                     name="incident-publisher").start()
    main_wait()


main()

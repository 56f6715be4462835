# -*- coding: utf-8 -*-
"""A target for `pyprof-bpf dump`: threads parked in varied code.

    python parked.py OUT.json

Runs unchanged on CPython 3.10 to 3.15. Every thread (the main thread too)
parks in a blocking call. Once all of them are parked, a recorder thread takes
sys._current_frames() until two snapshots agree, writes the expected
`pyprof-bpf dump --json` output to OUT.json atomically (tmp + rename), and
exits, so that it is not part of what the dump sees. The process then stays
parked until it is killed.

The expected JSON is exactly the shape of `dump --json` (frames innermost
first; function = co_qualname, file = co_filename, line = f_lineno), with the
thread ids and pid as the target sees them (in a PID namespace the test maps
them to host ids), plus keys starting with "_" that carry diagnostics.

Every line number below matters to the test only through f_lineno, so the
file can be edited freely; keep the code shapes (they are the point).
"""
import json
import os
import platform
import sys
import threading
import time

OUT = sys.argv[1]

_lock = threading.Lock()
_arrived = 0


def arrived():
    global _arrived
    with _lock:
        _arrived += 1


def sleep_forever():
    arrived()
    while True:
        time.sleep(3600)


def wait_forever(ev):
    arrived()
    ev.wait()


# --- a method of a class, parked in Event.wait (Python frames in threading.py)
class Parker:
    def __init__(self):
        self.ev = threading.Event()

    def wait_here(self):
        return wait_forever(self.ev)


def t_method():
    Parker().wait_here()


# --- nested class: qualname Outer.Inner.meth
class Outer:
    class Inner:
        def meth(self):
            sleep_forever()


def t_nested():
    Outer.Inner().meth()


# --- a closure
def make_closure(depth):
    def closure():
        if depth:
            sleep_forever()
    return closure


def t_closure():
    make_closure(1)()


# --- lambdas: one at module level, one inside a function
module_lambda = lambda: sleep_forever()


def t_lambda():
    inner = lambda f: f()
    inner(module_lambda)


# --- generators being iterated: a for loop over a generator that delegates
# with `yield from`; it yields a few times (so FOR_ITER can specialize) first.
def inner_gen():
    for i in range(50):
        yield i
    sleep_forever()
    yield -1


def outer_gen():
    yield from inner_gen()


def t_generator():
    total = 0
    for x in outer_gen():
        total += x
    return total


# --- a coroutine driven by send() from plain code (no event loop)
async def coro_inner():
    sleep_forever()


async def coro_outer():
    await coro_inner()


def t_coroutine():
    c = coro_outer()
    try:
        c.send(None)
    finally:
        c.close()


# --- recursion
def recurse(n):
    if n <= 1:
        sleep_forever()
        return 0
    return recurse(n - 1) + 1


def t_recursion_30():
    recurse(30)


def t_recursion_200():
    recurse(200)


# --- a call spread over several lines
def takes_args(a, b, *, c=None):
    sleep_forever()


def t_multiline():
    value = takes_args(
        1,
        (2,
         3),
        c=[
            4,
        ],
    )
    return value


# --- Python called back from C: sorted()'s key and map() (C entry frames)
def t_c_callback():
    list(map(lambda x: sorted([2, 1], key=lambda k: sleep_forever()), [0]))


# --- specialised calls that push Python frames without a C call: __init__
# through the class call, and a property, each after a warm-up.
class Widget:
    def __init__(self, i):
        self.i = i
        if i == 200:
            sleep_forever()


def t_init():
    for i in range(201):
        Widget(i)


class Holder:
    def __init__(self):
        self.n = 0

    @property
    def value(self):
        self.n += 1
        if self.n == 200:
            sleep_forever()
        return self.n


def t_property():
    h = Holder()
    for _ in range(201):
        h.value


# --- non-ASCII names (latin-1, UCS-2 and UCS-4 strings in the target)
class Ünïcødé:
    def 方法(self):
        def ß_inner():
            sleep_forever()
        ß_inner()


def größe():
    Ünïcødé().方法()


def t_unicode():
    größe()


# --- code compiled from a string, line numbers in the thousands
GENERATED = "\n" * 3000 + '''\
def generated_leaf(park):
    park()


def generated_mid(park):
    return generated_leaf(
        park,
    )


generated_mid(park)
'''


def t_exec_generated():
    exec(compile(GENERATED, "<generated>", "exec"), {"park": sleep_forever})


# The same from a "file" with a non-ASCII (UCS-4) name, CJK and UCS-4
# identifiers, and a function whose body is ~2500 lines below its `def`
# (a long jump in the location table).
MODULE = "\n" * 2000 + '''\
class 処理:
    def 実行(self, park):
        return 𠀀𠀁(park)
''' + "\n" * 2500 + '''\
def 𠀀𠀁(park):
    x = 1
''' + "\n" * 2500 + '''\
    park()
    return x


def run(park):
    return 処理().実行(park)
'''
MODULE_FILE = "/opt/app/модуль_𝄞.py"


def t_exec_module():
    ns = {}
    exec(compile(MODULE, MODULE_FILE, "exec"), ns)
    ns["run"](sleep_forever)


# --- a thread whose OS name (3.14+) is cut in the middle of a UTF-8 character
def t_cut_name():
    sleep_forever()


WORKERS = [
    ("method", t_method),
    ("nested-class", t_nested),
    ("closure", t_closure),
    ("lambda", t_lambda),
    ("generator", t_generator),
    ("coroutine", t_coroutine),
    ("recursion-30", t_recursion_30),
    ("deep-recursion-200", t_recursion_200),   # OS name cut to 15 bytes
    ("multi-line-call", t_multiline),
    ("c-callback", t_c_callback),
    ("init-shim", t_init),
    ("property", t_property),
    ("größe-ünï", t_unicode),                  # 13 bytes in UTF-8
    ("処理スレッド", t_exec_module),             # 18 bytes: cut at 15, clean
    ("exec-generated", t_exec_generated),
    ("ünïcødé-ünïcødé", t_cut_name),          # cut at 15 bytes, mid-character
]


def qualname(code):
    return getattr(code, "co_qualname", code.co_name)  # co_name on 3.10 only


def stack(frame):
    out = []
    while frame is not None:
        code = frame.f_code
        out.append({"function": qualname(code), "file": code.co_filename,
                    "line": frame.f_lineno})
        frame = frame.f_back
    return out


def snapshot(me):
    frames = sys._current_frames()
    threads = []
    for t in threading.enumerate():
        if t.ident == me:
            continue
        threads.append({"tid": t.native_id, "name": t.name,
                        "frames": stack(frames[t.ident])})
    extra = set(frames) - {t.ident for t in threading.enumerate()}
    if extra:
        raise RuntimeError(f"threads unknown to threading: {extra}")
    threads.sort(key=lambda t: t["tid"])
    return threads


def record():
    me = threading.get_ident()
    deadline = time.monotonic() + 120
    while _arrived < len(WORKERS) + 1:
        if time.monotonic() > deadline:
            sys.stderr.write(f"parked: only {_arrived} threads parked\n")
            os._exit(3)
        time.sleep(0.01)
    prev = None
    while True:
        cur = snapshot(me)
        if cur == prev:
            break
        prev = cur
        time.sleep(0.2)
    doc = {
        "pid": os.getpid(),
        "python": platform.python_version(),
        "threads": cur,
        "_recorder_tid": threading.get_native_id(),
        "_version_info": list(sys.version_info[:3]),
    }
    tmp = OUT + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, OUT)
    # returning ends this thread: it is gone before the test dumps


def main():
    for name, fn in WORKERS:
        threading.Thread(target=fn, name=name, daemon=True).start()
    threading.Thread(target=record, name="recorder", daemon=True).start()
    sleep_forever()


if __name__ == "__main__":
    main()

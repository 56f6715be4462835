"""A thread burning CPU in a subinterpreter, the main thread in the main one.

    python sl_subinterp.py LOG

A thread named "sub-runner" creates a subinterpreter
(concurrent.interpreters.create(), its own GIL) and runs SUB_CODE in it with
Interpreter.exec(): sub_loop() calling sub_work() forever. Meanwhile the main
thread runs main_loop() calling main_work() forever, in the main
interpreter. The two never share a function, a file or a line.

LOG (JSON, written once both run) holds the version, the pid, the native
thread ids of the main thread and of sub-runner, this file's name, and the
(qualname, [lines]) of the subinterpreter's code objects ("sub_module",
"sub_loop", "sub_work", with their file name "<script>", as exec() names a
string's code) and of main_loop and main_work. Runs until killed. CPython
3.14+ (concurrent.interpreters).
"""
import json
import os
import sys
import threading
import time

from concurrent import interpreters

LOG = sys.argv[1]

SUB_CODE = """\
def sub_work(n):
    x = 0
    for i in range(n):
        x += i * i % 7
    return x

def sub_loop():
    while True:
        sub_work(5000)

sub_loop()
"""

state = {}


def code_lines(code):
    return sorted({ln for _, _, ln in code.co_lines() if ln is not None})


def sub_layout():
    mod = compile(SUB_CODE, "<script>", "exec")
    out = {"sub_module": [mod.co_qualname, code_lines(mod)]}
    for c in mod.co_consts:
        if hasattr(c, "co_lines"):
            out[c.co_qualname] = [c.co_qualname, code_lines(c)]
    return out


def runner():
    state["sub_tid"] = threading.get_native_id()
    interp = interpreters.create()
    state["created"] = True
    interp.exec(SUB_CODE)


def main_work(n):
    y = 1
    for i in range(n):
        y = (y * 7 + i) % 65521
    return y


def main_loop(then):
    t_log = time.monotonic() + 0.3
    while True:
        main_work(5000)
        if then and time.monotonic() > t_log:
            then()
            then = None


def write_log():
    log = {"python": "%d.%d.%d" % sys.version_info[:3], "pid": os.getpid(),
           "main_tid": threading.get_native_id(), "sub_tid": state["sub_tid"],
           "file": __file__, "code": sub_layout()}
    for fn in (main_loop, main_work):
        log["code"][fn.__code__.co_qualname] = [fn.__code__.co_qualname,
                                                code_lines(fn.__code__)]
    with open(LOG + ".tmp", "w") as f:
        json.dump(log, f)
    os.replace(LOG + ".tmp", LOG)


def main():
    threading.Thread(target=runner, name="sub-runner", daemon=True).start()
    while "created" not in state:
        time.sleep(0.01)
    main_loop(write_log)


if __name__ == "__main__":
    main()

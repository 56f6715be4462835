#!/usr/bin/env python3
"""A target for fuzz seeds (tests/fuzz/support/fake_target.h): threads in
recursion under non-ASCII names, then stopped. Prints the FUZZ_CAPTURE
numbers: PID MINOR RUNTIME CODE_TYPE CORO_TYPE ASYNCGEN_TYPE."""
import ctypes, os, signal, sys, threading, types

def données_ünïcode(n, ev):
    if n:
        return données_ünïcode(n - 1, ev)
    ev.wait()

class 日本:
    def 関数(self, ev):
        return (lambda: données_ünïcode(3, ev))()

def main():
    ev = threading.Event()
    ts = [threading.Thread(target=日本().関数, args=(ev,)) for _ in range(2)]
    for t in ts:
        t.start()
    rt = ctypes.addressof(ctypes.c_char.in_dll(ctypes.pythonapi, "_PyRuntime"))
    print(os.getpid(), sys.version_info[1], hex(rt), hex(id(types.CodeType)),
          hex(id(types.CoroutineType)), hex(id(types.AsyncGeneratorType)), flush=True)
    os.kill(os.getpid(), signal.SIGSTOP)
    ev.set()

if __name__ == "__main__":
    main()

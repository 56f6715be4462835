"""Known native call paths, each in its own thread, for tests/test_native.py.

    python native_paths.py INFO_PATH [PATHS]

PATHS is a comma-separated subset of sort,qsort,zlib,hashlib,read (default:
all). Each path loops forever in its own thread:
  sort:    sorted(big_list, key=python_fn)       -> list.sort -> python_fn
  qsort:   libc qsort with a CFUNCTYPE comparator -> libffi -> libc -> libffi -> comparator
  zlib:    zlib.compress of a 2 MB pseudo-random buffer (leaf in libz)
  hashlib: hashlib.sha256 of an 8 MB buffer (libcrypto, or CPython's HACL* code)
  read:    os.read of 1 MB chunks of /dev/zero (leaf in the kernel: read_zero)
No os.urandom anywhere (the vDSO getrandom is a known unwinding gap).
When every thread has done one round, INFO_PATH gets a JSON object: the
Python version, the thread ids, which module implements sha256 and its file.
"""
import ctypes
import hashlib
import json
import os
import sys
import threading
import zlib

INFO = sys.argv[1]
PATHS = sys.argv[2].split(",") if len(sys.argv) > 2 else [
    "sort", "qsort", "zlib", "hashlib", "read"]

# Pseudo-random bytes, deterministic, without os.urandom: 2 MB of SHA-256 output.
NOISE = b"".join(hashlib.sha256(i.to_bytes(4, "little")).digest() for i in range(65536))
BIG = NOISE * 4

started = {}
lock = threading.Lock()


def ready(name):
    with lock:
        started.setdefault(name, threading.get_native_id())


def python_fn(x):
    return -x  # LINE:key


def sort_loop():
    data = list(range(20000))
    while True:
        sorted(data, key=python_fn)  # LINE:sorted
        ready("sort")


libc = ctypes.CDLL("libc.so.6")
CMP = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int))


def comparator(a, b):
    return a[0] - b[0]  # LINE:cmp


CMP_C = CMP(comparator)


def qsort_loop():
    n = 3000
    arr = (ctypes.c_int * n)()
    while True:
        for i in range(n):
            arr[i] = (i * 7919) % n
        libc.qsort(arr, n, ctypes.sizeof(ctypes.c_int), CMP_C)  # LINE:qsort
        ready("qsort")


def zlib_loop():
    while True:
        zlib.compress(NOISE, 6)  # LINE:zlib
        ready("zlib")


def hashlib_loop():
    while True:
        hashlib.sha256(BIG).digest()  # LINE:hashlib
        ready("hashlib")


def read_loop():
    fd = os.open("/dev/zero", os.O_RDONLY)
    while True:
        os.read(fd, 1 << 20)  # LINE:read
        ready("read")


LOOPS = {"sort": sort_loop, "qsort": qsort_loop, "zlib": zlib_loop,
         "hashlib": hashlib_loop, "read": read_loop}


def sha256_impl():
    h = hashlib.sha256()
    mod = type(h).__module__
    m = sys.modules.get(mod)
    return mod, getattr(m, "__file__", None)


def main():
    for name in PATHS:
        threading.Thread(target=LOOPS[name], name=name, daemon=True).start()
    while True:
        with lock:
            if len(started) == len(PATHS):
                break
        threading.Event().wait(0.01)
    mod, path = sha256_impl()
    info = {"python": ".".join(map(str, sys.version_info[:3])), "tids": started,
            "sha256_module": mod, "sha256_file": path, "executable": sys.executable}
    with open(INFO + ".tmp", "w") as f:
        json.dump(info, f)
    os.rename(INFO + ".tmp", INFO)
    threading.Event().wait()


main()

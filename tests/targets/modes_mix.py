"""Threads that spend their time in known ways, for the modes of issue #10
(tests/test_modes.py).

    python modes_mix.py INFO LOG DIR [SECONDS]
    python modes_mix.py --feeder PORT PERIOD_S      (the child it starts)

Threads (each named after its role; 3.14+ also names the OS thread so):

  spin     on the CPU with the GIL released: hashlib.sha256 of a 16 MiB
           buffer in a loop (OpenSSL hashes without the GIL above 2 KiB), so
           it is on a CPU (or runnable) all the time but for the moments it
           takes the GIL back between two hashes.
  gil_a    pure Python arithmetic, forever: the two of them (and spin,
  gil_b    between its hashes) contend for the GIL; besides running they
           only ever wait for the GIL.
  sleep    takes LOCK at its start and never gives it back, then
           time.sleep(0.05) in a loop (clock_nanosleep).
  lock     LOCK.acquire(timeout=0.2) in a loop: it never gets it (a futex
           wait of 0.2 s, timed out).
  recv     conn.recv(8) in a loop on a TCP connection from a child process
           (this file run with --feeder) that sends its CLOCK_MONOTONIC time
           (8 bytes) every 0.1 s.
  fsync    os.pwrite() of 1 MiB at offset 0 of a file in DIR, then
           os.fsync() of it, in a loop (DIR must be on a real disk).
  main     writes LOG every 50 ms (time.sleep between).

INFO (JSON, written atomically once every thread runs): {"python": "3.X.Y",
"pid": N, "child": N, "tids": {role: native thread id}, "sleep_s": 0.05,
"lock_timeout_s": 0.2, "feed_period_s": 0.1}.

LOG: lines "ROLE T0 END T1" (CLOCK_MONOTONIC ns) appended by the main thread
in batches, one per blocking call of sleep, lock, recv and fsync, taken by the
thread itself: T0 right before the call (holding the GIL), T1 right after it
returned (holding the GIL again), END when the wait the call exists for ended
by construction: sleep: T0 + 0.05 s (+ 25 us, half the default timer slack);
lock: T0 + 0.2 s (its timeout); recv: the time the feeder stamped in the data
just before sending it (T0 when the data was there before the call); fsync:
END = T1 (the kernel's end of an fsync is not known to Python). Between END
and T1 the thread was woken, waited for a CPU and for the GIL.

Runs for SECONDS (default 120) then exits. Stdlib only; CPython 3.11+.
"""
import hashlib
import faulthandler
import json
import os
import socket
import struct
import subprocess
import sys
import threading
import time

SLEEP_S = 0.05
LOCK_TIMEOUT_S = 0.2
FEED_PERIOD_S = 0.1
TIMER_SLACK_NS = 25_000
HASH_BYTES = 16 << 20
WRITE_BYTES = 8 << 20

records = []          # "ROLE T0 END T1" lines; list.append is atomic
LOCK = threading.Lock()


def spin():
    buf = bytes(range(256)) * (HASH_BYTES // 256)
    while True:
        hashlib.sha256(buf).digest()


def contend():
    x = 0
    while True:
        for i in range(100000):
            x = (x * 31 + i) % 1000003


def sleeper(started):
    LOCK.acquire()
    started.set()
    d = int(SLEEP_S * 1e9)
    while True:
        t0 = time.monotonic_ns()
        time.sleep(SLEEP_S)
        records.append("sleep %d %d %d" % (t0, t0 + d + TIMER_SLACK_NS, time.monotonic_ns()))


def lock_waiter():
    d = int(LOCK_TIMEOUT_S * 1e9)
    while True:
        t0 = time.monotonic_ns()
        got = LOCK.acquire(timeout=LOCK_TIMEOUT_S)
        t1 = time.monotonic_ns()
        if got:
            raise SystemExit("lock: acquired LOCK, which the sleep thread holds")
        records.append("lock %d %d %d" % (t0, t0 + d, t1))


def receiver(conn):
    while True:
        t0 = time.monotonic_ns()
        data = conn.recv(8)
        t1 = time.monotonic_ns()
        if len(data) < 8:
            if not data:
                raise SystemExit("recv: the feeder closed the connection")
            data += conn.recv(8 - len(data), socket.MSG_WAITALL)
        sent, = struct.unpack("<q", data)
        records.append("recv %d %d %d" % (t0, max(t0, sent), t1))


def fsyncer(path):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    bufs = [bytes([k]) * WRITE_BYTES for k in (0x55, 0xAA)]
    n = 0
    while True:
        os.pwrite(fd, bufs[n & 1], 0)
        n += 1
        t0 = time.monotonic_ns()
        os.fsync(fd)
        t1 = time.monotonic_ns()
        records.append("fsync %d %d %d" % (t0, t1, t1))


def feeder(port, period):
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    step = int(period * 1e9)
    nxt = time.monotonic_ns() + step
    while True:
        left = nxt - time.monotonic_ns()
        if left > 0:
            time.sleep(left / 1e9)
        try:
            s.sendall(struct.pack("<q", time.monotonic_ns()))
        except OSError:
            return
        nxt += step


def main():
    faulthandler.enable(all_threads=True)   # a crash says where, on stderr
    info_path, log_path, directory = sys.argv[1:4]
    lifetime = float(sys.argv[4]) if len(sys.argv) > 4 else 120.0
    deadline = time.monotonic() + lifetime

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    child = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--feeder",
                              str(srv.getsockname()[1]), str(FEED_PERIOD_S)],
                             stdin=subprocess.DEVNULL)
    conn, _ = srv.accept()
    srv.close()

    fsync_path = os.path.join(directory, "modes_fsync_%d.dat" % os.getpid())
    started = threading.Event()
    threads = [
        threading.Thread(target=spin, name="spin", daemon=True),
        threading.Thread(target=contend, name="gil_a", daemon=True),
        threading.Thread(target=contend, name="gil_b", daemon=True),
        threading.Thread(target=sleeper, args=(started,), name="sleep", daemon=True),
        threading.Thread(target=lock_waiter, name="lock", daemon=True),
        threading.Thread(target=receiver, args=(conn,), name="recv", daemon=True),
        threading.Thread(target=fsyncer, args=(fsync_path,), name="fsync", daemon=True),
    ]
    threads[3].start()
    started.wait()
    for t in threads[:3] + threads[4:]:
        t.start()
    tids = {t.name: t.native_id for t in threads}
    tids["main"] = threading.get_native_id()
    info = {"python": "%d.%d.%d" % sys.version_info[:3], "pid": os.getpid(),
            "child": child.pid, "tids": tids, "sleep_s": SLEEP_S,
            "lock_timeout_s": LOCK_TIMEOUT_S, "feed_period_s": FEED_PERIOD_S}
    with open(info_path + ".tmp", "w") as f:
        json.dump(info, f)
    os.replace(info_path + ".tmp", info_path)

    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    done = 0
    try:
        while time.monotonic() < deadline:
            time.sleep(0.05)
            n = len(records)
            if n > done:
                os.write(log, ("".join(r + "\n" for r in records[done:n])).encode())
                done = n
            for t in threads:
                if not t.is_alive():
                    raise SystemExit(f"thread {t.name} ended")
    finally:
        child.kill()
        try:
            os.unlink(fsync_path)
        except OSError:
            pass


if __name__ == "__main__":
    if sys.argv[1] == "--feeder":
        feeder(int(sys.argv[2]), float(sys.argv[3]))
    else:
        main()

"""The events cell's workload (events.py): one thread doing what an event
counts, as fast as it can, counting its operations.

    python3 events_workload.py COUNTER KIND

faults: map 4 MiB of anonymous memory, write one byte per page, unmap:
one operation per page (a page fault each).
openat: open and close /dev/null: one operation per open (an openat each).

COUNTER holds the operations done so far, a little-endian u64 rewritten
in place every 1,000 operations (events.py reads it before and after a
window); 1 once started.
"""
import mmap
import os
import struct
import sys

PAGE = os.sysconf("SC_PAGE_SIZE")
CHUNK = 4 << 20


def main():
    path, kind = sys.argv[1], sys.argv[2]
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    os.pwrite(fd, struct.pack("<Q", 1), 0)
    done = 1
    if kind == "faults":
        while True:
            m = mmap.mmap(-1, CHUNK)
            for off in range(0, CHUNK, PAGE):
                m[off] = 1
            m.close()
            done += CHUNK // PAGE
            os.pwrite(fd, struct.pack("<Q", done), 0)
    while True:
        for _ in range(1000):
            os.close(os.open("/dev/null", os.O_RDONLY))
        done += 1000
        os.pwrite(fd, struct.pack("<Q", done), 0)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
# Seeds of fuzz_asyncio_offsets: a live 3.14+ process (asyncio imported) that
# printed its _PyRuntime address (ctypes.c_char.in_dll(ctypes.pythonapi, "_PyRuntime")).
# Usage: asyncio_tables.py PID ROOT MINOR RUNTIME -> stdout [u8 minor][.AsyncioDebug][_Py_DebugOffsets]
#        asyncio_tables.py --addr PID -> the table's address, in hex
import struct, sys
if sys.argv[1] == '--addr':
    pid, root = int(sys.argv[2]), ''
else:
    pid, root, minor, rt = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4], 16)
def section(path, name):
    e = open(root + path, 'rb').read()
    shoff, = struct.unpack_from('<Q', e, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from('<HHH', e, 0x3a)
    sh = lambda i: struct.unpack_from('<IIQQQQ', e, shoff + i * shentsize)
    stroff = sh(shstrndx)[4]
    phoff, = struct.unpack_from('<Q', e, 0x20)
    phentsize, phnum = struct.unpack_from('<HH', e, 0x36)
    load = min(struct.unpack_from('<IIQQ', e, phoff + i * phentsize)[3] & ~0xfff
               for i in range(phnum) if struct.unpack_from('<I', e, phoff + i * phentsize)[0] == 1)
    for i in range(shnum):
        nm, _, _, addr, off, size = sh(i)
        if e[stroff + nm:e.index(b'\0', stroff + nm)] == name:
            return addr - load
mem = open('/proc/%d/mem' % pid, 'rb')
def rd(a, n):
    mem.seek(a); return mem.read(n)
seen = set()
for line in open('/proc/%d/maps' % pid):
    p = line.split()
    if len(p) < 6 or p[5] in seen or not ('_asyncio' in p[5] or 'python3' in p[5]):
        continue
    seen.add(p[5])
    a = section(p[5], b'.AsyncioDebug')
    if a is not None:
        at = int(p[0].split('-')[0], 16) - int(p[2], 16) + a
        if sys.argv[1] == '--addr':
            print(hex(at)); sys.exit(0)
        tab = rd(at, 104)
        break
sys.stdout.buffer.write(bytes([minor]) + tab + rd(rt, 1000))

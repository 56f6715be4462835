#!/usr/bin/env python3
"""Write a location-table fixture for tests/unit/test_linetable.c and
tests/unit/test_unicode.c, as seen by the interpreter that runs this script.

    python3.X dump_linetables.py OUT [--no-strings]

Text format, one record per line, fields separated by single spaces:

    # comment
    python VERSION HEXVERSION
    code FIRSTLINENO NBYTES TABLE_HEX|- NAME
    i OFFSET LINE END_LINE COL END_COL          (one per code unit)
    str STATE_HEX KIND ASCII LENGTH PAYLOAD_HEX|- UTF8_HEX|- LABEL
    end NCODES NINSTR NSTR

`code` starts a code object: co_firstlineno, len(co_code) (the size of
co_code_adaptive), co_linetable. Each `i` line that follows gives, for the
byte offset OFFSET (instruction index * 2), the line from co_lines(), which
the script checks against co_positions() and PyCode_Addr2Line() (what
frame.f_lineno reports); END_LINE, COL and END_COL come from co_positions().
A missing value (None) is written as -1. NAME (co_qualname) is last and may
hold spaces only if the name does; it is informative.

`str` is a live str object: its PyASCIIObject state word read from memory
(native endian), the kind and ascii flag Python-level facts predict, the
payload bytes read from memory, and its UTF-8 encoding with every surrogate
replaced by U+FFFD (the documented behaviour of pyunicode__to_utf8()).

The last line, `end`, lets the reader check that the file is complete.
Any disagreement between the interpreter's own views makes the script exit
with status 1 and a message instead of writing a fixture.
"""
import ctypes
import importlib
import sys
import types

# ---------------------------------------------------------------------------
# Code shapes the fixture must cover. They are compiled from this file's own
# source below, so their line numbers are this file's.


class Shapes:
    """Methods, properties, nested classes."""

    def method(self, x):
        return [y * 2 for y in range(x) if y % 3]

    @property
    def prop(self):
        return {k: v for k, v in zip("abc", range(3))}

    class Inner:
        def deep(self):
            return lambda a, b=2: (a + b,
                                   a - b)


def generator(n):
    for i in range(n):
        yield i
    yield from range(n)
    return sum(x for x in range(n) if x)


async def coroutine(items):
    async with items as it:
        async for x in it:
            await x
    return [y async for y in items]


def spread_call(a, b, c):
    return max(
        a,
        b,

        c,
    ) + min(a,
            b, c)


def exceptions(f):
    try:
        f()
    except ValueError as e:
        raise RuntimeError("wrapped") from e
    finally:
        f()
    with open(f) as a, open(f) as b:
        return a, b


def matching(v):
    match v:
        case {"k": [1, 2, *rest]}:
            return rest
        case Shapes(prop=p) if p:
            return p
        case _:
            return None


def größe(名前, ÿ=1):
    return 名前 * ÿ + len("𝔘𝔫𝔦")


def long_columns():
    return "................................................................................................................................................" + str(1) + "................................................................................................................................................"


def closures():
    a = 1

    def middle():
        nonlocal a

        def inner():
            return a
        return inner
    return middle


# ---------------------------------------------------------------------------
# Source compiled from a string: line numbers in the thousands and beyond,
# large and negative line deltas (multi-chunk varints), deep nesting.

def generated_source():
    parts = ["# generated\n" * 2500]
    parts.append(
        "def far_away(n):\n"
        "    total = 0\n"
        "    for i in range(n):\n"
        + "\n" * 300 +
        "        total += i\n"
        "    return total\n")
    parts.append("\n" * 70000)
    parts.append(
        "class Far:\n"
        "    def m(self, x):\n"
        "        while x:\n"
        "            x -= 1\n"
        + "\n" * 5000 +
        "            if x == 3:\n"
        "                break\n"
        "        return (lambda: x)()\n")
    parts.append("\n" * 1000)
    # a call spread over many lines, with the arguments out of line order
    parts.append("value = dict(\n" + "".join(
        f"    k{i}={i},\n" + "\n" * (i * 37 % 11) for i in range(60)) + ")\n")
    # except* is 3.11 syntax: kept out of this file so that 3.10 can parse
    # it far enough to refuse cleanly
    parts.append(
        "def groups(f):\n"
        "    try:\n"
        "        f()\n"
        "    except* TypeError as eg:\n"
        "        f(eg)\n"
        "    except* (ValueError, KeyError):\n"
        "        pass\n")
    parts.append("def nested():\n" + "".join(
        "    " * (d + 1) + f"def n{d}():\n" for d in range(20))
        + "    " * 21 + "return 1\n")
    return "".join(parts)


# ---------------------------------------------------------------------------

class FixtureError(Exception):
    pass


def addr2line():
    """PyCode_Addr2Line() through ctypes, or None when ctypes cannot reach
    it. It is what frame.f_lineno reports."""
    try:
        f = ctypes.pythonapi.PyCode_Addr2Line
    except (AttributeError, OSError):
        return None
    f.argtypes = [ctypes.py_object, ctypes.c_int]
    f.restype = ctypes.c_int
    return f


def walk(co, seen):
    """co and every code object nested in its constants, each once."""
    stack = [co]
    while stack:
        c = stack.pop()
        if id(c) in seen:
            continue
        seen[id(c)] = c
        yield c
        stack.extend(k for k in reversed(c.co_consts) if isinstance(k, types.CodeType))


def nz(v):
    return -1 if v is None else v


def code_records(co, a2l):
    nbytes = len(co.co_code)
    lines = {}
    for start, end, line in co.co_lines():
        for off in range(start, end, 2):
            if off in lines:
                raise FixtureError(f"{co.co_qualname}: offset {off} twice in co_lines()")
            lines[off] = nz(line)
    positions = list(co.co_positions())
    if len(positions) != nbytes // 2:
        raise FixtureError(f"{co.co_qualname}: {len(positions)} positions, "
                           f"{nbytes // 2} code units")
    name = co.co_qualname.replace("\n", " ")
    table = co.co_linetable.hex() or "-"
    out = [f"code {co.co_firstlineno} {nbytes} {table} {name}"]
    for idx, (line, end_line, col, end_col) in enumerate(positions):
        off = idx * 2
        if off not in lines:
            raise FixtureError(f"{co.co_qualname}: offset {off} not in co_lines()")
        expect = lines[off]
        if nz(line) != expect:
            raise FixtureError(f"{co.co_qualname}: offset {off}: co_lines {expect}, "
                               f"co_positions {line}")
        if a2l is not None and a2l(co, off) != expect:
            raise FixtureError(f"{co.co_qualname}: offset {off}: co_lines {expect}, "
                               f"PyCode_Addr2Line {a2l(co, off)}")
        out.append(f"i {off} {expect} {nz(end_line)} {nz(col)} {nz(end_col)}")
    # Negative offsets answer co_firstlineno. Offsets beyond the code are not
    # asked: the debug build asserts on them.
    if a2l is not None and a2l(co, -2) != co.co_firstlineno:
        raise FixtureError(f"{co.co_qualname}: PyCode_Addr2Line(-2) != co_firstlineno")
    return out


def module_code(name):
    """The code object the interpreter runs for module name (from its .pyc
    when there is one), not a fresh compile."""
    mod = importlib.import_module(name)
    code = mod.__loader__.get_code(name)
    if code is None:
        raise FixtureError(f"no code for module {name}")
    return code


def code_objects():
    with open(__file__, encoding="utf-8") as f:
        own = f.read()
    roots = [
        compile(own, __file__, "exec"),
        compile(generated_source(), "<generated>", "exec"),
        # live code objects, as the running interpreter holds them
        Shapes.method.__code__, generator.__code__, größe.__code__,
        module_code("typing"),
        module_code("argparse"),
    ]
    seen = {}
    for root in roots:
        yield from walk(root, seen)


# ---------------------------------------------------------------------------
# str objects read from memory

STRINGS = [
    ("empty", ""),
    ("ascii1", "a"),                       # a static singleton in 3.12+
    ("ascii", "plain_ascii_name"),
    ("latin1_static", "\xe9"),             # a static singleton in 3.12+
    ("latin1", "größe"),
    ("latin1_ff", "ÿÿ"),
    ("ucs2", "名前"),
    ("ucs2_mixed", "a名é"),
    ("ucs4", "𝔘𝔫𝔦"),
    ("ucs4_mixed", "a名𝔘é"),
    ("ucs4_max", "\U0010ffff"),
    ("lone_high", "\ud800"),
    ("lone_low_pair", "x\udfff\ud800y"),
    ("surrogate_pair_ucs2", "\ud83d\ude00"),
    ("surrogate_ucs4", "𝔘\udc00"),
    ("nul", "a\x00b"),
    ("long_ascii", "abcdefghij" * 40),
    ("long_ucs2", "名前" * 200),
]


def layout():
    """Offsets inside a str object, from Python-level facts: the header is
    object.__basicsize__ bytes, then length and hash (8 bytes each on the
    64-bit builds tested), then the state word. A compact ASCII payload
    follows sizeof(PyASCIIObject), others sizeof(PyCompactUnicodeObject):
    sys.getsizeof() of a fresh one-character string without a cached UTF-8
    copy is that size plus two characters (the character and its NUL)."""
    head = object.__basicsize__
    state = head + 16
    ascii_hdr = sys.getsizeof("") - 1
    compact_hdr = sys.getsizeof(chr(0xe9) + chr(0xe8)) - 3
    return head, state, ascii_hdr, compact_hdr


def string_records():
    head, state_off, ascii_hdr, compact_hdr = layout()
    out = []
    for label, s in STRINGS + sorted(names_from_code()):
        mx = max(map(ord, s), default=0)
        kind = 1 if mx < 0x100 else 2 if mx < 0x10000 else 4
        is_ascii = mx < 0x80
        base = id(s)
        length = int.from_bytes(ctypes.string_at(base + head, 8), sys.byteorder)
        if length != len(s):
            raise FixtureError(f"str layout: length {length} at {head}, want {len(s)}")
        state = int.from_bytes(ctypes.string_at(base + state_off, 4), sys.byteorder)
        data = base + (ascii_hdr if is_ascii else compact_hdr)
        payload = ctypes.string_at(data, len(s) * kind).hex() or "-"
        text = "".join("\ufffd" if 0xd800 <= ord(c) <= 0xdfff else c for c in s)
        utf8 = text.encode("utf-8").hex() or "-"
        out.append(f"str {state:08x} {kind} {int(is_ascii)} {len(s)} {payload} {utf8} {label}")
    return out


def names_from_code():
    """Interned identifiers, as a code object holds them."""
    co = größe.__code__
    yield ("qualname", co.co_qualname)
    for v in co.co_varnames:
        yield ("varname", v)


def main(argv):
    if len(argv) < 2 or len(argv) > 3 or (len(argv) == 3 and argv[2] != "--no-strings"):
        print(f"usage: {argv[0]} OUT [--no-strings]", file=sys.stderr)
        return 2
    if sys.version_info < (3, 11):
        print(f"Python {sys.version.split()[0]} has no location tables", file=sys.stderr)
        return 2
    a2l = addr2line()
    lines = [
        "# pyprof-bpf location-table fixture, written by tests/tools/dump_linetables.py",
        f"python {sys.version.split()[0]} {sys.hexversion:08x}",
        f"# PyCode_Addr2Line cross-check: {'yes' if a2l else 'no'}",
    ]
    ncodes = ninstr = nstr = 0
    try:
        for co in code_objects():
            rec = code_records(co, a2l)
            ncodes += 1
            ninstr += len(rec) - 1
            lines.extend(rec)
        if len(argv) == 2:
            rec = string_records()
            nstr = len(rec)
            lines.extend(rec)
    except FixtureError as e:
        print(f"dump_linetables: Python {sys.version.split()[0]}: {e}", file=sys.stderr)
        return 1
    lines.append(f"end {ncodes} {ninstr} {nstr}")
    with open(argv[1], "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    print(f"{argv[1]}: {ncodes} code objects, {ninstr} instructions, {nstr} strings")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

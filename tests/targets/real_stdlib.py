"""Real stdlib work, for interpreters without Debian's packages.

    python real_stdlib.py SECONDS

Starts by importing many stdlib modules. Then, until SECONDS have passed,
every iteration
  - exec()s a freshly generated module (filename "<generated-N>") that
    defines functions gen_N_K and calls them, and eval()s generated
    expressions (filename "<string>"): new code objects that die at once;
  - imports fresh copies of two stdlib modules from their source files (each
    module body is a new code object, run once);
  - encodes and decodes a JSON document (json, pure-Python parts too:
    indent and sort_keys go through json.encoder's Python iterator);
  - builds a multipart email (email.message.EmailMessage), serializes it and
    parses it back with email.parser under email.policy.default;
  - byte-compiles a small temporary source tree with compileall.compile_dir
    (compileall -> py_compile -> importlib, forced every time).
Prints "ready" on stdout when the loop starts; exits 0. Runs on CPython 3.8+.
"""
import argparse  # noqa: F401  (the import-heavy start)
import ast  # noqa: F401
import calendar  # noqa: F401
import compileall
import csv  # noqa: F401
import dataclasses  # noqa: F401
import decimal  # noqa: F401
import difflib  # noqa: F401
import email.message
import email.parser
import email.policy
import importlib.util
import json
import logging  # noqa: F401
import os
import random
import shutil
import sys
import tempfile
import time

FRESH = ["colorsys", "textwrap", "shlex", "fractions", "statistics", "calendar",
         "difflib", "pprint", "string", "glob", "fnmatch", "html"]


def generated_module(i, rng):
    lines = []
    for k in range(6):
        a, b = rng.randint(2, 9), rng.randint(10, 99)
        lines.append(f"def gen_{i}_{k}(n):\n"
                     f"    acc = {k}\n"
                     f"    for j in range(n):\n"
                     f"        acc = (acc * {a} + j ^ {b}) % 1000003\n"
                     f"    return acc\n")
    lines.append("total = " + " + ".join(f"gen_{i}_{k}({1500 + 300 * k})" for k in range(6)))
    return "\n".join(lines)


def exec_fresh(rng, i):
    ns = {}
    exec(compile(generated_module(i, rng), f"<generated-{i}>", "exec"), ns)
    total = ns["total"]
    for k in range(10):
        expr = " + ".join(f"({rng.randint(1, 99)} * {k} - {j} // 3)" for j in range(12))
        total += eval(f"sum(x * ({expr}) for x in range({k + 30}))")
    return total


def fresh_import(name, i):
    spec = importlib.util.find_spec(name)
    copy = importlib.util.spec_from_file_location(f"_fresh_{name}_{i}", spec.origin)
    mod = importlib.util.module_from_spec(copy)
    sys.modules[copy.name] = mod        # as an import does, while the body runs
    try:
        copy.loader.exec_module(mod)
    finally:
        del sys.modules[copy.name]
    return mod


def json_round_trip(rng, i):
    doc = {"id": i, "items": [{"name": f"n{k}-{rng.random():.6f}", "vals": list(range(k % 9)),
                               "ok": k % 3 == 0, "nested": {"k": k, "s": "\u00e9\n\t" * 3}}
                              for k in range(120)]}
    text = json.dumps(doc, indent=2, sort_keys=True)
    back = json.loads(text)
    return len(text) + len(back["items"])


def email_round_trip(rng, i):
    msg = email.message.EmailMessage()
    msg["From"] = f"Sender {i} <sender{i}@example.org>"
    msg["To"] = ", ".join(f"Person {k} <p{k}@example.org>" for k in range(5))
    msg["Subject"] = f"Report {i}: caf\u00e9 r\u00e9sum\u00e9 {rng.random():.4f}"
    msg.set_content("Hello,\n\n" + "\n".join(f"line {k} caf\u00e9" for k in range(30)))
    msg.add_alternative("<html><body>" + "<p>x</p>" * 30 + "</body></html>", subtype="html")
    msg.add_attachment(bytes(rng.getrandbits(8) for _ in range(600)),
                       maintype="application", subtype="octet-stream", filename=f"d{i}.bin")
    raw = msg.as_bytes()
    back = email.parser.BytesParser(policy=email.policy.default).parsebytes(raw)
    n = 0
    for part in back.walk():
        if part.get_content_maintype() != "multipart":
            n += len(part.get_content())
    return n + len(str(back["To"]))


def make_tree(root, rng):
    for d in range(3):
        sub = os.path.join(root, f"pkg{d}")
        os.makedirs(sub, exist_ok=True)
        for m in range(4):
            with open(os.path.join(sub, f"mod{m}.py"), "w") as f:
                f.write(generated_module(d * 10 + m, rng))
                f.write("\nclass C:\n    def method(self):\n        return [i for i in range(9)]\n")


def main():
    seconds = float(sys.argv[1])
    rng = random.Random(4)
    tree = tempfile.mkdtemp(prefix="real_stdlib_")
    try:
        make_tree(tree, rng)
        deadline = time.monotonic() + seconds
        print("ready", flush=True)
        i = n = 0
        while time.monotonic() < deadline:
            i += 1
            n += exec_fresh(rng, i) & 1
            for j in range(2):
                fresh_import(FRESH[(2 * i + j) % len(FRESH)], i)
            n += json_round_trip(rng, i)
            n += email_round_trip(rng, i)
            if i % 4 == 0:
                compileall.compile_dir(tree, force=True, quiet=1)
        print(f"{i} iterations, {n}", file=sys.stderr)
    finally:
        shutil.rmtree(tree, ignore_errors=True)
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()

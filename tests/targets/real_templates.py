"""Short-lived code: jinja2 templates compiled from strings, eval() and exec()
of generated source, and module bodies run by fresh imports.

    python real_templates.py SECONDS

Starts by importing many stdlib modules and jinja2 (Debian's python3-jinja2).
Then, until SECONDS have passed, every iteration
  - compiles a new jinja2 template from a string (jinja2's lexer, parser and
    code generator, then compile() of the Python it generates, filename
    "<template>") and renders it: its root() and macro code objects are new
    every time and die with the template;
  - exec()s a freshly generated module (filename "<generated-N>") that
    defines functions gen_N_K and calls them, and eval()s generated
    expressions (filename "<string>");
  - imports fresh copies of two stdlib modules from their source files (each
    module body is a new code object, run once).
Prints "ready" on stdout when the loop starts; exits 0. Needs jinja2.
"""
import argparse  # noqa: F401  (the import-heavy start)
import ast  # noqa: F401
import calendar  # noqa: F401
import collections
import csv  # noqa: F401
import dataclasses  # noqa: F401
import datetime
import decimal  # noqa: F401
import difflib  # noqa: F401
import email.message  # noqa: F401
import fractions  # noqa: F401
import importlib.util
import inspect  # noqa: F401
import json  # noqa: F401
import logging  # noqa: F401
import os
import pathlib  # noqa: F401
import pprint  # noqa: F401
import random
import shlex  # noqa: F401
import statistics  # noqa: F401
import string  # noqa: F401
import sys
import textwrap  # noqa: F401
import time
import typing  # noqa: F401
import urllib.parse  # noqa: F401
import xml.dom.minidom  # noqa: F401

import jinja2

# Stdlib modules whose bodies are re-run by fresh_import, under a new name
# (absolute imports only, no side effects on the modules already loaded).
FRESH = ["colorsys", "textwrap", "shlex", "fractions", "statistics", "calendar",
         "difflib", "pprint", "string", "glob", "fnmatch", "html"]

TEMPLATE = """\
{%% macro card(item, n) -%%}
<div class="card c{{ n }}" id="{{ item.id }}-%(i)d">
  <h2>{{ item.name | title }} #{{ n }}</h2>
  {%% if item.score > %(cut)d %%}<b>{{ "%%.2f" | format(item.score) }}</b>{%% else %%}
  <i>{{ item.score | round(1) }}</i>{%% endif %%}
  <ul>{%% for t in item.tags %%}<li>{{ t | upper }}{{ loop.index }}</li>{%% endfor %%}</ul>
</div>
{%%- endmacro %%}
<html><head><title>{{ title }} %(i)d</title></head><body>
{%% for item in items | sort(attribute="score") %%}
  {{ card(item, loop.index) }}
{%% endfor %%}
<p>{{ items | map(attribute="name") | join(", ") | truncate(%(trunc)d) }}</p>
<p>{{ items | sum(attribute="score") | int }} / {{ items | length }}</p>
</body></html>
"""


def context(rng, n):
    items = []
    for i in range(n):
        name = "".join(rng.choice("abcdefghij") for _ in range(6))
        items.append({"id": i, "name": name, "score": rng.random() * 100,
                      "tags": [name[:k] for k in range(1, 5)]})
    return {"title": f"page <{n}>", "items": items}


def render_fresh(env, rng, i):
    src = TEMPLATE % {"i": i, "cut": rng.randint(10, 90), "trunc": rng.randint(40, 200)}
    tmpl = env.from_string(src)
    return tmpl.render(context(rng, 25))


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
    for k in range(20):
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


def main():
    seconds = float(sys.argv[1])
    rng = random.Random(1)
    env = jinja2.Environment(autoescape=True, cache_size=0)
    deadline = time.monotonic() + seconds
    print("ready", flush=True)
    i = 0
    sizes = collections.Counter()
    while time.monotonic() < deadline:
        i += 1
        sizes["html"] += len(render_fresh(env, rng, i))
        sizes["exec"] += exec_fresh(rng, i) & 1
        for j in range(2):
            fresh_import(FRESH[(2 * i + j) % len(FRESH)], i)
    print(f"{i} iterations at {datetime.datetime.now():%H:%M:%S}", sizes, file=sys.stderr)
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()

"""The real programs (tests/targets/real_*.py) and how to start one
(test_real_programs, test_hostile)."""
import os
import re
import select
import subprocess
import time

import pytest

from lib.procs import START_TIMEOUT, TARGETS, stage_unique


HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tests/
LIFETIME = 40             # the target's own limit: it outlives the recording


# The stdlib's own generated code (namedtuple's __new__, dataclasses'
# __create_fn__ and the dunders it defines) lands in "<string>" as well.
STRING_NAMES = re.compile(r"^(<module>|<lambda>|<genexpr>|<listcomp>|<locals>|"
                          r"__create_fn__|__\w+__)$")


# jinja2's generated template module: root(), block_*(), macros (nested in
# root or a block as "macro"), and Python's own names.
TEMPLATE_NAMES = re.compile(r"^(root|block_\w+|macro|<module>|<lambda>|<genexpr>|"
                            r"<listcomp>|<locals>)$")


class Program:
    def __init__(self, name, debian, pseudo, expect):
        self.name = name
        self.script = os.path.join(TARGETS, f"real_{name}.py")
        self.debian = debian
        # pseudo-file regex -> (its match -> (qualname -> allowed?)): the
        # code this program compiles from strings, by file and name
        self.pseudo = dict(STDLIB_PSEUDO, **pseudo)
        # (qualname regex, where) that must be among the named frames;
        # where: "script", a pseudo-file regex, or a path suffix regex
        self.expect = expect

    def __repr__(self):
        return self.name


def names_of(qualname):
    """The names in a qualname: dotted, with <...> kept whole."""
    return re.findall(r"<[^>]*>|[^.<>]+", qualname)


def each(rx):
    """A qualname check: every name in it matches rx."""
    return lambda m: lambda q: all(rx.match(n) for n in names_of(q))


# Every program: namedtuple's __new__ (urllib.parse's results, ...) and
# dataclasses' methods are compiled by the stdlib under "<string>".
STDLIB_PSEUDO = {r"<string>": each(STRING_NAMES)}


# exec of generated source: "<generated-N>" holds gen_N_K only.
GENERATED = {r"<generated-(\d+)>": lambda m: lambda q: all(
    re.match(r"^(gen_%s_\d+|<module>|<genexpr>)$" % m.group(1), n) for n in names_of(q))}


TEMPLATE = {r"<template>": each(TEMPLATE_NAMES)}


# sympy.polys.monomials.MonomialOps exec()s monomial_mul, monomial_gcd, ...
# from string templates.
SYMPY = {r"<string>": each(re.compile(STRING_NAMES.pattern[:-2] + r"|monomial_\w+)$"))}


# werkzeug.routing.rules.Rule._compile_builder compiles an AST under
# "<werkzeug routing>" whose function is named "<builder:'RULE'>".
WERKZEUG = {r"<werkzeug routing>": lambda m: lambda q: re.fullmatch(
    r"<builder:'[^']*'>|<module>", q) is not None}


PROGRAMS = [
    Program("http", False, {}, [
        (r"JsonHandler\.do_GET", "script"),
        (r"JsonHandler\.do_POST", "script"),
        (r"build_rows", "script"),
        (r"BaseHTTPRequestHandler\.handle_one_request", r"/http/server\.py"),
        (r"ThreadingMixIn\.process_request_thread", r"/socketserver\.py"),
    ]),
    Program("stdlib", False, GENERATED, [
        (r"gen_\d+_\d+", r"<generated-\d+>"),
        (r"<module>", r"/(colorsys|textwrap|shlex|fractions|statistics|calendar|difflib|"
                      r"pprint|string|glob|fnmatch|html)(/__init__)?\.py"),
        (r"json_round_trip", "script"),
        (r"email_round_trip", "script"),
        (r".*", r"/email/[^/]+\.py"),
        (r".*", r"/json/[^/]+\.py"),
        (r"compile_dir", r"/compileall\.py"),
    ]),
    Program("templates", True, dict(GENERATED, **TEMPLATE), [
        (r"root", r"<template>"),
        (r"Environment\.from_string", r"/jinja2/environment\.py"),
        (r".*", r"/jinja2/(lexer|parser|compiler)\.py"),
        (r"gen_\d+_\d+", r"<generated-\d+>"),
        (r"<module>", r"/(colorsys|textwrap|shlex|fractions|statistics|calendar|difflib|"
                      r"pprint|string|glob|fnmatch|html)(/__init__)?\.py"),
    ]),
    Program("docutils", True, {}, [
        (r"publish_string", r"/docutils/core\.py"),
        (r".*", r"/docutils/parsers/rst/states\.py"),
        (r".*", r"/docutils/writers/_html_base\.py"),
    ]),
    Program("sympy", True, SYMPY, [
        (r"iteration", "script"),
        (r"expand", r"/sympy/core/function\.py"),
        (r"integrate", r"/sympy/integrals/integrals\.py"),
        (r".*", r"/sympy/simplify/[^/]+\.py"),
    ]),
    Program("flask", True, dict(TEMPLATE, **WERKZEUG), [
        (r"Flask\.wsgi_app", r"/flask/app\.py"),
        (r"page", "script"),
        (r"api_sum", "script"),
        (r"root", r"<template>"),
        (r".*", r"/werkzeug/[\w/]+\.py"),
    ]),
]


def start(prog, interp, procs, tmp_path, log=None):
    script = stage_unique(interp, prog.script, procs)
    err_path = str(tmp_path / f"{prog.name}.stderr")
    args = [script, str(LIFETIME)] + ([log] if log else [])
    with open(err_path, "wb") as err:
        p = subprocess.Popen(interp.argv(args), stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=err, start_new_session=True)
    p.stderr_path = err_path
    procs.items.append(p)
    deadline = time.monotonic() + START_TIMEOUT
    line = b""
    while not line.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or p.poll() is not None:
            break
        if select.select([p.stdout], [], [], min(left, 0.2))[0]:
            ch = os.read(p.stdout.fileno(), 1)
            if not ch:
                break
            line += ch
    if line != b"ready\n":
        with open(err_path, "rb") as f:
            err = f.read().decode("utf-8", "replace")
        pytest.fail(f"real_{prog.name}.py on {interp.label} did not print ready "
                    f"(got {line!r}, exit {p.poll()}); stderr:\n{err[-3000:]}")
    return p, script

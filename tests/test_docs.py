"""The docs against the binary and the tree (issue #37 item 3): a test that fails
when the documentation drifts from what pyprof-bpf does.

- Every long option named in docs/usage.md and the man page is in some command's
  `--help` (options of other tools are in OTHER_TOOLS, each with why), and every
  long option of a command's `--help` is in docs/usage.md; the synopses of
  usage.md's "Commands" name each command's options, and only those.
- Every relative link of docs/*.md resolves to a file, and every `#anchor` to a
  heading of its target, by GitHub's rules for heading ids.
- Limits and defaults said in `--help` are the code's constants, parsed from the
  sources: the agent's --push and --label counts, its -F default and record's.
- usage.md's contents, modes and end-of-recording lines follow --help; the fuzz
  harnesses and test files the docs name exist, every fuzz table in docs/ has a row
  for each harness, and docs/testing.md names every test file.
- The checks fail on planted faults (test_checks_catch_plants).

README.md is checked the same way in functions of its own (test_readme_*), so that
what it lacks is seen apart from the rest.

Run from the repository root:
    /usr/bin/python3 -m pytest -q -p no:cacheprovider tests/test_docs.py
"""
import glob
import os
import re
import urllib.parse

import pytest

from lib import pyenvs
from lib.tool import run_tool, show

REPO = pyenvs.REPO
COMMANDS = ("record", "top", "dump", "report", "agent")
# argp's own options, in every command's --help.
ARGP_OWN = {"--help", "--usage", "--version"}
USAGE = os.path.join(REPO, "docs", "usage.md")
MAN = os.path.join(REPO, "man", "pyprof-bpf.1")
README = os.path.join(REPO, "README.md")
TESTING = os.path.join(REPO, "docs", "testing.md")
DOCS = sorted(glob.glob(os.path.join(REPO, "docs", "*.md")))

# Long options the docs name that belong to other programs, not to pyprof-bpf:
# they are quoted to say what our output matches, how another tool reads it, or
# how to run us under another tool. (docker's --pid=host needs no entry: -p,
# --pid is ours too.)
OTHER_TOOLS = {
    # perf record --off-cpu: the shape of our off-CPU samples
    "--off-cpu": "perf",
    # stackcollapse-perf.pl --event-filter=EVENT keeps one event's samples
    "--event-filter": "stackcollapse-perf.pl",
    # flamegraph.pl --color=java colours our kernel frames
    "--color": "flamegraph.pl",
    # callgrind_annotate --auto=yes reads our callgrind output
    "--auto": "callgrind_annotate",
    # CPython 3.15's profiler, what --async is compared with
    "--async-aware": "python -m profiling.sampling",
    # scripts/bench, the agent's cost measured
    "--agent-only": "scripts/bench", "--agent-secs": "scripts/bench",
    # systemctl enable --now pyprof-bpf-agent
    "--now": "systemctl",
    # setpriv: how the unit's capabilities were found, and running us with
    # ambient capabilities as another user (PRIVILEGES)
    "--bounding-set": "setpriv", "--reuid": "setpriv", "--regid": "setpriv",
    "--init-groups": "setpriv", "--inh-caps": "setpriv", "--ambient-caps": "setpriv",
    # docker run: running us in a container
    "--rm": "docker", "--privileged": "docker", "--cap-add": "docker",
    "--security-opt": "docker",
    # the OpenTelemetry Collector that takes --push otlp, curl posting a
    # record --format otlp file to it, protoc decoding one
    "--config": "otelcol", "--feature-gates": "otelcol", "--data-binary": "curl",
    "--decode": "protoc",
}

LONG_OPT = re.compile(r"(?<![\w./=-])--([a-z][a-z0-9]*(?:-[a-z0-9]+)*)")


# --------------------------------------------------------------------------
# --help, parsed


class Help:
    """One command's --help: its text, its doc (before the options) and
    {long option: (short, argument, description)}."""
    OPTION = re.compile(r"^(?:  (-[^-\s]), |      )(--[a-z][a-z0-9-]*)(\[?=[^\s]+)?")

    def __init__(self, text):
        self.text = text
        self.options = {}
        self.doc_lines = []
        cur = None
        for line in text.splitlines():
            m = self.OPTION.match(line)
            if m:
                short, opt, arg = m.groups()
                cur = [short, (arg or "").lstrip("[=").rstrip("]"), line[m.end():].strip()]
                self.options[opt] = cur
            elif cur and line.startswith(" " * 8):
                cur[2] += " " + line.strip()
            else:
                cur = None
                if not self.options:
                    self.doc_lines.append(line)
        self.doc = " ".join(" ".join(self.doc_lines).split())

    def desc(self, opt):
        return " ".join(self.options[opt][2].split())

    def has(self, opt):
        """opt is a long option, or a short one (-p)."""
        return opt in self.options or any(v[0] == opt for v in self.options.values())


@pytest.fixture(scope="module")
def helps():
    """{command: Help}, each --help run once; "" is `pyprof-bpf --help`."""
    out = {}
    for cmd in COMMANDS + ("",):
        p = run_tool([cmd, "--help"] if cmd else ["--help"], timeout=30)
        assert p.returncode == 0, f"pyprof-bpf {cmd} --help: {show(p)}"
        out[cmd] = Help(p.stdout.decode())
    for cmd in COMMANDS:
        assert ARGP_OWN <= set(out[cmd].options), f"{cmd} --help not parsed: {out[cmd].options}"
    return out


def all_options(helps):
    """Every long option of every command, with the commands that have it."""
    out = {}
    for cmd in COMMANDS:
        for opt in helps[cmd].options:
            out.setdefault(opt, []).append(cmd)
    return out


# --------------------------------------------------------------------------
# the files, read


def rel(path):
    return os.path.relpath(path, REPO)


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def md_lines(path):
    """[(line number, line, in a fenced code block)] of a Markdown file."""
    out, fence = [], None
    for no, line in enumerate(read(path).splitlines(), 1):
        m = re.match(r"^\s*(```+|~~~+)", line)
        if m and (fence is None or m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence)):
            fence = None if fence else m.group(1)
            out.append((no, line, True))
            continue
        out.append((no, line, fence is not None))
    return out


def after_separator(line):
    """A command line's own part: what follows a lone `--` (the command
    pyprof-bpf starts, `-- python3 app.py --port 8080`) is that command's."""
    return re.split(r"(?<!\S)--(?!\S)", line, maxsplit=1)[0]


def md_option_lines(path):
    """[(line number, text)] with link targets and URLs taken out (an anchor
    such as #-a---all-and---comm-regex is no option), and a started command's
    own arguments."""
    out = []
    for no, line, _ in md_lines(path):
        line = re.sub(r"\]\([^)\s]*\)", "]", line)
        line = re.sub(r"\b[a-z]+://\S+", "", line)
        out.append((no, after_separator(line)))
    return out


def md_command_lines(path):
    """[(line number, text)]: pyprof-bpf's command lines in a Markdown file,
    from `pyprof-bpf` to the end of their code span or code-block line (a
    pipe, `;`, `&&`, a `#` comment or a `--` separator ends them first)."""
    out = []
    for no, line, fenced in md_lines(path):
        pieces = [line] if fenced else [m[1] for m in re.findall(r"(`+)(.+?)\1", line)]
        for piece in pieces:
            for m in re.finditer(r"(?<![\w-])pyprof-bpf(?![\w/-])(.*)", piece):
                cmd = re.split(r"\s(?:\||;|&&|#)", m.group(1), maxsplit=1)[0]
                out.append((no, after_separator(cmd)))
    return out


ROFF_ALTERNATING = {".BR", ".RB", ".BI", ".IB", ".IR", ".RI"}


def roff_plain(line):
    """A roff line as the text man shows: macro arguments joined (without a
    space for the alternating-font macros), fonts and escapes resolved."""
    if line.startswith(".\\\"") or line.startswith("'\\\""):
        return ""
    macro = None
    if line.startswith("."):
        macro, _, line = line.partition(" ")
        args = [a or b for a, b in re.findall(r'"([^"]*)"|(\S+)', line)]
        line = ("" if macro in ROFF_ALTERNATING else " ").join(args)
    line = re.sub(r"\\f(?:[BIRP]|\(..|\[[^]]*\])", "", line)
    line = re.sub(r"\\[c%&]", "", line)
    line = line.replace("\\-", "-").replace("\\(aq", "'").replace("\\(dq", '"')
    return line.replace("\\e", "\\")


def man_option_lines():
    return [(no, after_separator(roff_plain(line)))
            for no, line in enumerate(read(MAN).splitlines(), 1)]


# --------------------------------------------------------------------------
# a: every option the docs name is one of ours


def unknown_options(helps, what, lines):
    ours = all_options(helps)
    bad = []
    for no, text in lines:
        for name in LONG_OPT.findall(text):
            opt = "--" + name
            if opt not in ours and opt not in OTHER_TOOLS:
                bad.append(f"{what}:{no}: {opt} is in no command's --help "
                           f"({', '.join(COMMANDS)}): {text.strip()[:100]!r}")
    return bad


def test_other_tools_are_not_ours(helps):
    """The allow-list cannot hide an option of ours."""
    ours = all_options(helps)
    clash = sorted(set(OTHER_TOOLS) & set(ours))
    assert not clash, f"OTHER_TOOLS lists options pyprof-bpf has: {clash}"


def test_top_level_help_options(helps):
    """`pyprof-bpf --help`, written by hand, names the commands' options."""
    bad = unknown_options(helps, "pyprof-bpf --help",
                          list(enumerate(helps[""].text.splitlines(), 1)))
    assert not bad, "\n".join(bad)


def test_usage_options_exist(helps):
    bad = unknown_options(helps, "docs/usage.md", md_option_lines(USAGE))
    assert not bad, "\n".join(bad)


def test_man_page_options_exist(helps):
    bad = unknown_options(helps, "man/pyprof-bpf.1", man_option_lines())
    assert not bad, "\n".join(bad)


def test_other_docs_options_exist(helps):
    """The rest of docs/ (how-it-works.md, benchmarks.md...) names the options
    of scripts and tools too: there, the options of pyprof-bpf's own command
    lines are checked."""
    bad = []
    for path in DOCS:
        if path != USAGE:
            bad += unknown_options(helps, rel(path), md_command_lines(path))
    assert not bad, "\n".join(bad)


def test_readme_options(helps):
    bad = unknown_options(helps, "README.md", md_option_lines(README))
    assert not bad, "\n".join(bad)


# --------------------------------------------------------------------------
# b: every option of --help is in usage.md


def undocumented(helps, path):
    """The options of the commands' --help that the file never names."""
    named = {"--" + o for o in LONG_OPT.findall(" ".join(t for _, t in md_option_lines(path)))}
    return [f"{rel(path)}: `pyprof-bpf {cmd} --help` has {opt}, which it never names"
            for cmd in COMMANDS for opt in helps[cmd].options if opt not in named]


def test_every_help_option_in_usage(helps):
    bad = undocumented(helps, USAGE)
    assert not bad, "\n".join(bad)


def usage_synopses():
    """[(command, text)] of the synopsis block under usage.md's "## Commands":
    an entry per line starting with `pyprof-bpf`, its indented lines with it."""
    lines = md_lines(USAGE)
    start = next(i for i, (_, l, _) in enumerate(lines) if l.strip() == "## Commands")
    block, inside = [], False
    for _, line, fenced in lines[start:]:
        if fenced and line.strip().startswith("```"):
            if inside:
                break
            inside = True
        elif inside:
            block.append(line)
    entries = []
    for line in block:
        if line.startswith("pyprof-bpf"):
            words = line.split()
            cmd = words[1] if words[1] in COMMANDS else \
                "record" if words[1].startswith(("[record]", "-p", "-o", "-a")) else None
            entries.append([cmd, line])
        elif entries:
            entries[-1][1] += " " + line
    return [(cmd, text) for cmd, text in entries if cmd]


def test_usage_synopses(helps):
    """Each command's synopsis in usage.md names every option of its --help
    (top's and the agent's "[the sampling options]" stand for record's), and
    none that its --help lacks."""
    synopses = usage_synopses()
    assert {c for c, _ in synopses} == set(COMMANDS), synopses
    bad = []
    for cmd in COMMANDS:
        text = " ".join(t for c, t in synopses if c == cmd)
        named = set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*|-[A-Za-z])(?![\w])", text))
        own = helps[cmd].options
        shared = ("the sampling options" in text or "the same options" in text) and \
            cmd in ("top", "agent")
        for opt, (short, _, _) in own.items():
            if opt in ARGP_OWN or shared and opt in helps["record"].options:
                continue
            if opt not in named and short not in named:
                bad.append(f"docs/usage.md, synopsis of {cmd}: {opt} of `{cmd} --help` "
                           "is missing")
        for opt in named:
            if not helps[cmd].has(opt) and not (shared and helps["record"].has(opt)):
                bad.append(f"docs/usage.md, synopsis of {cmd}: {opt} is not in "
                           f"`{cmd} --help`")
    assert not bad, "\n".join(bad)


def test_usage_modes_and_summary_endings(helps):
    """Every mode of --mode has its row in usage.md's table of modes, is in
    its contents' Modes line, and has its ending of the summary line said."""
    modes = helps["record"].options["--mode"][1].split("|")
    text = read(USAGE)
    contents = text.split("\n## ", 1)[0]
    ends = text[text.index("## Messages at the end of a recording"):]
    ends = ends[:ends.index("\n## ")]
    bad = []
    for mode in modes:
        if not re.search(rf"^\| `{re.escape(mode)}`", text, re.M):
            bad.append(f"docs/usage.md: mode {mode} has no row in the table of modes")
        if not re.search(rf"\[Modes\][^\n]*(?<![\w-]){re.escape(mode)}(?![\w-])", contents):
            bad.append(f"docs/usage.md: mode {mode} is not in the contents' Modes line")
        if mode != "cpu" and f"; {mode} mode" not in ends:
            bad.append(f"docs/usage.md: the summary line's ending `; {mode} mode` is not "
                       "said under 'Messages at the end of a recording'")
    assert not bad, "\n".join(bad)


def test_usage_contents_lists_every_section():
    """Every `## ` section of usage.md is linked from its contents."""
    contents = read(USAGE).split("\n## ", 1)[0]
    linked = set(re.findall(r"\]\(#([^)]+)\)", contents))
    slugs = heading_slugs(USAGE, with_level=True)
    bad = [f"docs/usage.md: section {title!r} (#{slug}) is not in the contents"
           for level, title, slug in slugs if level == 2 and slug not in linked]
    assert not bad, "\n".join(bad)


# --------------------------------------------------------------------------
# c: links and anchors


def github_slug(title):
    """GitHub's id of a heading: its text, lowercase, every character but
    letters, digits, '_', '-' and spaces removed, spaces turned to '-'."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", title)   # links: their text
    text = re.sub(r"<[^>]+>", "", text)                         # HTML tags
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def heading_slugs(path, with_level=False):
    """The ids of a Markdown file's headings, in order, duplicates numbered
    (-1, -2) as GitHub numbers them; and ids given in HTML (id=, name=)."""
    seen, out = {}, []
    for _, line, fenced in md_lines(path):
        if fenced:
            continue
        m = re.match(r"^(#{1,6})\s+(.*?)(?:\s+#+)?\s*$", line)
        if m:
            base = github_slug(m.group(2))
            n = seen.get(base, 0)
            seen[base] = n + 1
            slug = base if n == 0 else f"{base}-{n}"
            out.append((len(m.group(1)), m.group(2), slug))
        for a in re.findall(r"<a\s[^>]*(?:name|id)=\"([^\"]+)\"", line):
            out.append((0, a, a))
    return out if with_level else {s for _, _, s in out}


def md_links(path):
    """[(line number, target)] of a Markdown file: inline links and images,
    reference definitions, HTML href and src; code left out."""
    out = []
    for no, line, fenced in md_lines(path):
        if fenced:
            continue
        line = re.sub(r"(`+).*?\1", "CODE", line)
        out += [(no, t) for t in re.findall(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)",
                                              line)]
        out += [(no, t) for t in re.findall(r"^\s*\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)", line)]
        out += [(no, t) for t in re.findall(r"\b(?:href|src)=\"([^\"]+)\"", line)]
    return out


def broken_links(path):
    bad = []
    for no, target in md_links(path):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):
            continue                    # http:, https:, mailto:
        where, _, anchor = target.partition("#")
        where = urllib.parse.unquote(where)
        dest = path if not where else os.path.normpath(
            os.path.join(REPO, where.lstrip("/")) if where.startswith("/")
            else os.path.join(os.path.dirname(path), where))
        if not os.path.exists(dest):
            bad.append(f"{rel(path)}:{no}: link {target!r}: {rel(dest)} does not exist")
            continue
        if anchor and dest.endswith(".md") and os.path.isfile(dest):
            if urllib.parse.unquote(anchor) not in heading_slugs(dest):
                bad.append(f"{rel(path)}:{no}: link {target!r}: {rel(dest)} has no "
                           f"heading #{anchor}")
    return bad


def test_docs_links():
    bad = []
    for path in DOCS:
        bad += broken_links(path)
    assert not bad, "\n".join(bad)


def test_readme_links():
    bad = broken_links(README)
    assert not bad, "\n".join(bad)


def test_slug_rules():
    """The slug function against ids GitHub gave these headings."""
    assert github_slug("Native and kernel frames (`--native`, `--kernel`)") == \
        "native-and-kernel-frames---native---kernel"
    assert github_slug("`-a`, `--all` and `--comm REGEX`") == "-a---all-and---comm-regex"
    assert github_slug("`top`: a live view") == "top-a-live-view"
    assert github_slug("The frame cache (CPython 3.15)") == "the-frame-cache-cpython-315"
    assert github_slug("fuzz_core_file, über") == "fuzz_core_file-über"


# --------------------------------------------------------------------------
# d: limits in --help against the code's constants


DEFINED_IN = {}


def constant(name, pattern):
    """The value of `#define name VALUE` in the files of pattern (a glob under
    the repository), exactly one; DEFINED_IN[name] says which file."""
    found = []
    for path in sorted(glob.glob(os.path.join(REPO, pattern))):
        for m in re.finditer(rf"^#define\s+{name}\s+\(?(\d+)(?:\.\d*)?\)?\s*(?:/\*.*)?$",
                             read(path), re.M):
            found.append((rel(path), int(m.group(1))))
    assert len(found) == 1, f"#define {name} in {pattern}: {found or 'not found'}"
    DEFINED_IN[name] = found[0][0]
    return found[0][1]


def cite(name):
    return f"{name} in {DEFINED_IN[name]}"


def agent_limit_problems(agent):
    bad = []
    for name, opt in (("AGENT_MAX_PUSH", "--push"), ("AGENT_MAX_LABELS", "--label")):
        n = constant(name, "user/agent/*.[ch]")
        desc = agent.desc(opt)
        if not re.search(rf"\b(?:up to|at most) {n}\b", desc):
            bad.append(f"agent --help: {opt} does not say its limit, {n} ({cite(name)}): "
                       f"{desc!r}")
    if re.search(r"any number", agent.doc):
        bad.append(f"agent --help: says 'any number' where --push stops at "
                   f"{constant('AGENT_MAX_PUSH', 'user/agent/*.[ch]')} "
                   f"({cite('AGENT_MAX_PUSH')}): {agent.doc!r}")
    return bad


def test_agent_limits_in_help(helps):
    bad = agent_limit_problems(helps["agent"])
    assert not bad, "\n".join(bad)


def freq_defaults(desc):
    """-F's "(default N...)": record's default, and the agent's when said
    apart ("(default 99; agent: 19)")."""
    m = re.search(r"\(default (\d+)(?:; (?:the )?agent(?:'s)?:? (\d+))?", desc)
    assert m, f"-F's description says no default: {desc!r}"
    return int(m.group(1)), int(m.group(2)) if m.group(2) else None


def test_freq_defaults_in_help(helps):
    record_default = constant("DEFAULT_FREQ", "user/commands/*.h")
    agent_default = constant("AGENT_DEFAULT_FREQ", "user/agent/*.[ch]")
    bad = []
    for cmd in ("record", "top"):
        said, _ = freq_defaults(helps[cmd].desc("--freq"))
        if said != record_default:
            bad.append(f"{cmd} --help: -F defaults to {said}, the code's is "
                       f"{record_default} ({cite('DEFAULT_FREQ')})")
    said, said_agent = freq_defaults(helps["agent"].desc("--freq"))
    if (said_agent or said) != agent_default:
        bad.append(f"agent --help: -F's default said {said_agent or said}, the agent's is "
                   f"{agent_default} ({cite('AGENT_DEFAULT_FREQ')}): "
                   f"{helps['agent'].desc('--freq')!r}")
    if f"at {agent_default} Hz" not in helps["agent"].doc:
        bad.append(f"agent --help: its text does not say it samples at {agent_default} Hz "
                   f"({cite('AGENT_DEFAULT_FREQ')})")
    assert not bad, "\n".join(bad)


def test_other_limits_in_help(helps):
    """Other defaults and limits --help says, against their constants."""
    checks = [
        ("record", "--max-depth", "DEFAULT_MAX_FRAMES", "user/commands/*.h", "default"),
        ("record", "--stack-size", "DEFAULT_NATIVE_STACK", "user/commands/*.h", "default"),
        ("record", "--event", "SAMPLER_MAX_EVENTS", "user/sampling/*.h", "up to"),
        ("agent", "--window", "AGENT_DEFAULT_WINDOW", "user/agent/*.h", "default"),
        ("agent", "--spool-size", "AGENT_DEFAULT_SPOOL_MB", "user/agent/*.h", "default"),
        ("agent", "--push-timeout", "AGENT_DEFAULT_PUSH_TIMEOUT", "user/agent/*.h", "default"),
    ]
    bad = []
    for cmd, opt, name, where, word in checks:
        n = constant(name, where)
        desc = helps[cmd].desc(opt)
        if not re.search(rf"\b{word}(?: and most)? {n}\b", desc):
            bad.append(f"{cmd} --help: {opt} does not say '{word} {n}' ({cite(name)}): "
                       f"{desc!r}")
    assert not bad, "\n".join(bad)


def test_agent_limits_in_docs():
    """usage.md and the man page say how many --push and --label the agent
    takes, and nowhere 'any number' of stores."""
    limits = {"--push": ("AGENT_MAX_PUSH", constant("AGENT_MAX_PUSH", "user/agent/*.[ch]")),
              "--label": ("AGENT_MAX_LABELS", constant("AGENT_MAX_LABELS", "user/agent/*.[ch]"))}
    docs = {"docs/usage.md": " ".join(read(USAGE).split()),
            "man/pyprof-bpf.1": " ".join(roff_plain(l) for l in read(MAN).splitlines())}
    bad = []
    for what, text in docs.items():
        for m in re.finditer(r"any number", text):
            near = text[max(0, m.start() - 80):m.end() + 80]
            if "push" in near or "store" in near:
                bad.append(f"{what}: 'any number' of --push: {near!r}")
        for opt, (name, n) in limits.items():
            if not re.search(rf"{opt}\W.{{0,120}}?\b(?:up to|at most) {n}\b|"
                             rf"\b(?:up to|at most) {n}\b.{{0,40}}?{opt}\W", text):
                bad.append(f"{what}: {opt}'s limit, {n} ({cite(name)}), is not said")
    assert not bad, "\n".join(bad)


# --------------------------------------------------------------------------
# the tree the docs name: fuzz harnesses and test files


def harnesses():
    return sorted(re.sub(r"^fuzz_|\.c$", "", os.path.basename(p))
                  for p in glob.glob(os.path.join(REPO, "tests", "fuzz", "fuzz_*.c")))


def unknown_harnesses(path, text):
    known = set(harnesses())
    return [f"{rel(path)}: names fuzz_{name}, but tests/fuzz/fuzz_{name}.c does not exist"
            for name in sorted(set(re.findall(r"(?<![\w/])fuzz_([a-z0-9_]+)", text)))
            if name not in known]


def fuzz_table_gaps(path):
    """The harnesses missing from the file's fuzz tables (tables with a
    `harness` column; none: nothing is missing)."""
    text = read(path)
    if not re.search(r"^\|[^\n]*\bharness\b[^\n]*\|", text, re.M | re.I):
        return []
    rows = "\n".join(l for l in text.splitlines() if l.startswith("|"))
    return [f"{rel(path)}: its fuzz table has no row for tests/fuzz/fuzz_{name}.c"
            for name in harnesses()
            if not re.search(rf"\| *`(?:fuzz_)?{name}`", rows)]


def test_fuzz_harnesses_named():
    """The harnesses docs/ and the man page name exist; a fuzz table in docs/
    (testing.md's, requirements.md's) has a row for each of tests/fuzz/fuzz_*.c."""
    bad = []
    for path in DOCS + [MAN]:
        bad += unknown_harnesses(path, read(path))
    for path in DOCS:
        bad += fuzz_table_gaps(path)
    assert re.search(r"^\| harness \|", read(TESTING), re.M), "docs/testing.md: no fuzz table"
    assert not bad, "\n".join(bad)


def test_testing_md_names_every_test_file():
    text = read(TESTING)
    bad = [f"docs/testing.md: tests/{os.path.basename(p)} is not in its tables"
           for p in sorted(glob.glob(os.path.join(REPO, "tests", "test_*.py")))
           if f"`{os.path.basename(p)}`" not in text]
    for name in sorted(set(re.findall(r"`(?:tests/)?(test_[a-z0-9_]+\.py)`", text))):
        if not os.path.exists(os.path.join(REPO, "tests", name)):
            bad.append(f"docs/testing.md: names {name}, which tests/ does not have")
    assert not bad, "\n".join(bad)


def test_readme_fuzz_harnesses():
    """The harnesses README names exist; a fuzz table in it (a `harness`
    column) has a row for each."""
    bad = unknown_harnesses(README, read(README)) + fuzz_table_gaps(README)
    assert not bad, "\n".join(bad)


# --------------------------------------------------------------------------
# the checks themselves, on planted faults


def test_checks_catch_plants(helps, tmp_path):
    """Each check fails on what it is there for: an option no --help has, an
    option of --help no doc names, a missing file, a missing heading, a limit
    said wrong."""
    (tmp_path / "other.md").write_text("# Other page\n\n## A `--flag` (here)\n\n"
                                       "## A `--flag` (here)\n")
    doc = tmp_path / "doc.md"
    doc.write_text("# Title\n\nRun `pyprof-bpf record --no-such-option` and `--freq`.\n\n"
                   "```\npyprof-bpf top -p 1 -- python3 app.py --port 8080\n```\n\n"
                   "[a](other.md#a---flag-here) [b](other.md#a---flag-here-1) "
                   "[c](other.md#a---flag-here-2) [d](missing.md) [e](#title) [f](#nope) "
                   "[g](https://example.com/x#y)\n")
    bad = unknown_options(helps, "doc.md", md_option_lines(str(doc)))
    assert len(bad) == 1 and "--no-such-option" in bad[0], bad
    bad = broken_links(str(doc))
    assert len(bad) == 3, bad
    assert "#a---flag-here-2" in bad[0] and "missing.md" in bad[1] and "#nope" in bad[2], bad
    missing = undocumented(helps, str(doc))
    assert any(m.endswith("has --pid, which it never names") for m in missing), missing
    assert not any("has --freq," in m for m in missing), missing
    # --help wraps its lines anywhere: plant across the breaks.
    text = re.sub(r"repeatable,\s+up\s+to\s+8\b", "repeatable", helps["agent"].text)
    planted = Help(re.sub(r"up\s+to\s+8\)", "any number)", text))
    bad = agent_limit_problems(planted)
    assert len(bad) == 2 and "--push" in bad[0] and "any number" in bad[1], bad

"""docutils rendering reStructuredText to HTML, over and over.

    python real_docutils.py SECONDS

Every iteration generates a different reStructuredText document (sections,
lists, a grid table, literal blocks, footnotes, field lists, admonitions,
inline markup, references) and renders it with docutils.core.publish_string
to HTML (Debian's python3-docutils): the whole reader, parser, transforms
and writer of docutils, all pure Python. Prints "ready" on stdout when the
loop starts; exits 0 after SECONDS.
"""
import os
import random
import sys
import time

import docutils.core

SETTINGS = {"report_level": 5, "halt_level": 5, "_disable_config": True,
            "embed_stylesheet": False, "output_encoding": "unicode"}


def words(rng, n):
    return " ".join(rng.choice(["alpha", "beta", "gamma", "delta", "*em*", "**strong**",
                                "``code``", "epsilon", "zeta", "`link`_", "eta"])
                    for _ in range(n))


def document(rng, i):
    out = [f"Document {i}", "=" * 20, "", ":Author: someone", f":Version: {i}", "",
           ".. contents::", ""]
    for s in range(4):
        title = f"Section {s} of {i}"
        out += [title, "-" * len(title), "", words(rng, 40) + " [#]_", "",
                f".. [#] Footnote {s}.", "", f".. _link: https://example.org/{i}/{s}", ""]
        out += [f"- item {k}: {words(rng, 6)}" for k in range(5)] + [""]
        out += [f"{k + 1}. step {words(rng, 4)}" for k in range(4)] + [""]
        out += ["+--------+--------+", "| a      | b      |", "+========+========+"]
        for r in range(3):
            out += [f"| {rng.randint(0, 999):<6} | {rng.randint(0, 999):<6} |",
                    "+--------+--------+"]
        out += ["", "::", ""] + [f"    line {k} = {rng.random():.3f}" for k in range(4)]
        out += ["", ".. note::", "", "   " + words(rng, 12), ""]
        out += ["term", "   " + words(rng, 8), ""]
    return "\n".join(out) + "\n"


def main():
    seconds = float(sys.argv[1])
    rng = random.Random(2)
    deadline = time.monotonic() + seconds
    print("ready", flush=True)
    i = n = 0
    while time.monotonic() < deadline:
        i += 1
        html = docutils.core.publish_string(document(rng, i), writer_name="html",
                                            settings_overrides=SETTINGS)
        n += len(html)
    print(f"{i} documents, {n} characters of HTML", file=sys.stderr)
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()

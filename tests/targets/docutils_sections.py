"""Issue #38 item 3's workload: docutils rendering one long document to HTML,
again and again.

    python docutils_sections.py SECONDS [SECTIONS]

The document has SECTIONS sections (60 by default), each a paragraph, a
bullet list and a `note` directive, rendered with
docutils.core.publish_string(..., writer_name="html") (Debian's
python3-docutils). Unlike real_docutils.py's short, varied documents, one
long document spends its time in docutils' tree walks over many nodes:
the transforms' and the writer's visitors, generators nested as deep as the
tree. Prints "ready" on stdout when the loop starts; exits 0 after SECONDS.
"""
import os
import sys
import time

import docutils.core

SETTINGS = {"report_level": 5, "halt_level": 5, "_disable_config": True,
            "embed_stylesheet": False, "output_encoding": "unicode"}


def document(sections):
    out = ["A long document", "=" * 15, ""]
    for s in range(sections):
        title = f"Section {s}"
        out += [title, "-" * len(title), "",
                f"Paragraph {s} with *emphasis*, **strong** text and ``code``.", ""]
        out += [f"- item {k} of section {s}" for k in range(5)] + [""]
        out += [".. note::", "", f"   A note in section {s}.", ""]
    return "\n".join(out) + "\n"


def main():
    seconds = float(sys.argv[1])
    sections = int(sys.argv[2]) if len(sys.argv) > 2 else 60
    text = document(sections)
    deadline = time.monotonic() + seconds
    print("ready", flush=True)
    i = n = 0
    while time.monotonic() < deadline:
        i += 1
        n += len(docutils.core.publish_string(text, writer_name="html",
                                              settings_overrides=SETTINGS))
    print(f"{i} documents, {n} characters of HTML", file=sys.stderr)
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()

"""A benchmark cell's result files: STEM.json and STEM.md in its directory,
and the newest run's table as BENCH_DIR/latest-STEM.md when the directory is
one of BENCH_DIR's (not for a --report of an old run elsewhere)."""
import json
import os
import shutil


def write(outdir, stem, res, text, bench_dir=None):
    """Writes @res as JSON and @text as the table; returns @text."""
    with open(os.path.join(outdir, stem + ".json"), "w") as f:
        json.dump(res, f, indent=1)
    md = os.path.join(outdir, stem + ".md")
    with open(md, "w") as f:
        f.write(text)
    if bench_dir and os.path.dirname(outdir) == bench_dir:
        shutil.copy(md, os.path.join(bench_dir, "latest-%s.md" % stem))
    return text

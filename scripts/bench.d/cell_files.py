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


def add_common_args(ap, stem, bench_dir, repo):
    """--binary, --out and --report, as every cell that runs alone takes them."""
    ap.add_argument("--binary", default=os.path.join(repo, "pyprof-bpf"))
    ap.add_argument("--out", help="results directory (default %s/<UTC time>-%s)"
                    % (bench_dir, stem))
    ap.add_argument("--report", metavar="JSON",
                    help="print the report of a finished run's %s.json again, and exit" % stem)


def reprint(args, text):
    """--report: the table of a finished run printed again. True when done."""
    if not args.report:
        return False
    with open(args.report) as f:
        print(text(json.load(f)))
    return True


def make_outdir(args, stem, bench_dir, stamp):
    """The run's directory (--out, else bench_dir/STAMP-STEM) and its logs/."""
    outdir = os.path.abspath(args.out or os.path.join(bench_dir, stamp + "-" + stem))
    logdir = os.path.join(outdir, "logs")
    os.makedirs(logdir, exist_ok=True)
    return outdir, logdir

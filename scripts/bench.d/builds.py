"""pyprof-bpf built from a fixed commit, outside the repository.

    build_rev(repo, rev, cache, log) -> (path of its pyprof-bpf, full sha)

The commit's tree is exported with `git archive` (nothing is written to the
repository: no worktree, no index, no refs) into CACHE/build-<sha12>.tmp-PID,
built there with make, and renamed to CACHE/build-<sha12> once it works. A
finished build is reused as is (the tree of a commit never changes); a lock
file makes concurrent benchmarks wait for one build instead of racing.
"""
import fcntl
import os
import shutil
import subprocess

from procstat import BenchError


def resolve(repo, rev):
    r = subprocess.run(["git", "-C", repo, "rev-parse", "--verify", "--quiet", rev + "^{commit}"],
                       capture_output=True, text=True)
    if r.returncode or not r.stdout.strip():
        raise BenchError("%s is not a commit of %s" % (rev, repo))
    return r.stdout.strip()


def short(repo, sha):
    r = subprocess.run(["git", "-C", repo, "rev-parse", "--short", sha],
                       capture_output=True, text=True)
    return r.stdout.strip() or sha[:7]


def _works(binary):
    if not os.access(binary, os.X_OK):
        return False
    r = subprocess.run([binary, "--version"], capture_output=True, text=True)
    return r.returncode == 0


def build_rev(repo, rev, cache, log):
    sha = resolve(repo, rev)
    os.makedirs(cache, exist_ok=True)
    dest = os.path.join(cache, "build-" + sha[:12])
    binary = os.path.join(dest, "pyprof-bpf")
    with open(dest + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(os.path.join(dest, ".built")) and _works(binary):
            return binary, sha
        shutil.rmtree(dest, ignore_errors=True)
        tmp = "%s.tmp-%d" % (dest, os.getpid())
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(tmp)
        log("bench: building %s (%s) in %s" % (rev, sha[:12], dest))
        archive = subprocess.Popen(["git", "-C", repo, "archive", "--format=tar", sha],
                                   stdout=subprocess.PIPE)
        untar = subprocess.run(["tar", "-x", "-C", tmp], stdin=archive.stdout,
                               capture_output=True, text=True)
        archive.stdout.close()
        if archive.wait() or untar.returncode:
            shutil.rmtree(tmp, ignore_errors=True)
            raise BenchError("git archive %s | tar -x failed: %s" % (sha[:12], untar.stderr.strip()))
        logpath = os.path.join(tmp, "build.log")
        with open(logpath, "w") as lf:
            r = subprocess.run(["make", "-C", tmp, "-j%d" % max(1, os.cpu_count() or 1),
                                "pyprof-bpf"], stdout=lf, stderr=subprocess.STDOUT)
        if r.returncode or not _works(os.path.join(tmp, "pyprof-bpf")):
            with open(logpath, errors="replace") as f:
                tail = f.read()[-800:]
            raise BenchError("building %s failed (log %s): %s" % (sha[:12], logpath, tail.strip()))
        with open(os.path.join(tmp, ".built"), "w") as f:
            f.write(sha + "\n")
        os.rename(tmp, dest)
        log("bench: built %s" % binary)
        return binary, sha

"""The incident.py target that `dump` tests look at (test_dump_incident, test_dump_core)."""
import json
import os
import shlex
import shutil
import time

from lib.tool import run_tool
from lib.procs import TARGETS, comm, out_path, stage_unique, stderr_of, wait_file


INCIDENT = os.path.join(TARGETS, "incident.py")


class Incident:
    def __init__(self, interp, popen, rec):
        self.interp, self.popen, self.rec = interp, popen, rec
        self.pid = popen.pid
        self.by_role = {}
        for t in rec["threads"]:
            self.by_role.setdefault(t["role"], []).append(t)
        self.by_tid = {t["native_id"]: t for t in rec["threads"]}

    def describe(self):
        return f"incident.py on {self.interp.label} (pid {self.pid})"

    def wait_parked(self, roles=("sleeper", "except", "lock", "main"), timeout=30):
        """Until the threads of @roles sleep in the kernel again ('S'): a
        dump --blocking interrupts their system calls (PTRACE_INTERRUPT), and
        after the detach each is runnable until it has restarted its wait; on
        a loaded machine a dump taken right then sees it running."""
        tids = [t["native_id"] for r in roles for t in self.by_role.get(r, ())]
        deadline = time.monotonic() + timeout
        while True:
            states = {}
            for tid in tids:
                with open(f"/proc/{self.pid}/task/{tid}/stat") as f:
                    states[tid] = f.read().rsplit(")", 1)[1].split()[0]
            if all(s == "S" for s in states.values()):
                return
            assert time.monotonic() < deadline, (
                f"{self.describe()}: parked threads not asleep after {timeout} s: {states}")
            time.sleep(0.01)


def with_own_proc(interp, cmd):
    """@cmd with /proc mounted inside the interpreter's root, in a mount
    namespace of its own: CPython's own reader run beside it (nsenter)
    needs one. As it is for an interpreter without a root."""
    if not interp.root:
        return cmd
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c",
            f"mount -t proc proc {shlex.quote(os.path.join(interp.root, 'proc'))} && "
            f"exec {shlex.join(cmd)}"]


def start_incident(interp, procs, tmp_path, private=False):
    """@private: from a copy of its own (a test that edits the file must
    not edit the repository's)."""
    src = INCIDENT
    if private:
        src = str(tmp_path / "incident.py")
        shutil.copyfile(INCIDENT, src)
    script = stage_unique(interp, src, procs)
    seen, host = out_path(interp, procs, tmp_path, "incident.json")
    cmd = with_own_proc(interp, interp.argv([script, seen]))
    p = procs.start(cmd, str(tmp_path / "incident.stderr"))
    wait_file(p, host, f"incident.py on {interp.label}")
    with open(host, encoding="utf-8") as f:
        rec = json.load(f)
    assert rec["pid"] == p.pid, f"the target is pid {rec['pid']}, started {p.pid}"
    assert rec["python"] == interp.version_str
    # the publisher thread ends once it has written the record
    want = {t["native_id"] for t in rec["threads"]}
    deadline = time.monotonic() + 30
    while {int(t) for t in os.listdir(f"/proc/{p.pid}/task")} != want:
        assert time.monotonic() < deadline and p.poll() is None, (
            f"tasks never became the recorded threads; stderr:\n{stderr_of(p)}")
        time.sleep(0.02)
    for t in rec["threads"]:
        t["comm"] = comm(p.pid, t["native_id"]).decode("utf-8", "replace")
    return Incident(interp, p, rec)


def dump_json(target, *extra):
    proc = run_tool(["dump", "-p", str(target.pid), "--json", *extra])
    assert proc.returncode == 0, (
        f"{target.describe()}: dump --json exited {proc.returncode}: "
        f"{proc.stderr.decode('utf-8', 'replace')}")
    return json.loads(proc.stdout.decode("utf-8"))


def role_of(target, t):
    return target.by_tid[t["tid"]]["role"]

"""Process trees that tests/test_subprocesses.py records with
`pyprof-bpf record --subprocesses` (and -p A,B).

Every process writes DIR/ROLE.PID (its Python version inside) when it
starts, and each role burns its CPU in a function of its own name, so that a
test can tell from a sample's frames which process it came from. Processes
that wait for DIR/go start their children only once the recorder is there.

sp_tree.py tree DIR GO CHILD_EXE GRAND_EXE
    parent: waits for DIR/go if GO is "wait"; starts CHILD_EXE (another
    Python) on this script as child_315, spins 0.4 s in parent_loop, waits
    for it. child_315 starts GRAND_EXE as grandchild, spins 0.4 s in
    child_315_spin, waits for it; grandchild spins 0.4 s in grandchild_spin.
sp_tree.py short DIR
    parent: waits for DIR/go, forks a child that spins 0.3 s in
    short_child_spin and exits (its file then gets "exit NS", NS its
    time.monotonic_ns() at the end); the parent spins in parent_loop while
    the child runs, waits for it, then 0.4 s more in parent_after_exit.
sp_tree.py tiny DIR
    parent: waits for DIR/go, then forks 20 children one after the other,
    each spinning 10 ms in tiny_child_spin before it exits (and is reaped):
    each ends well before the recorder reads its first sample.
sp_tree.py shell DIR
    parent: waits for DIR/go, runs `sh -c` with a CPU-bound shell loop
    (writes DIR/sh.PID with "START END CPU": monotonic ns around the wait and
    the parent's own CPU seconds over it), then `sh -c :` 40 times
    (DIR/sh_quick.PID each), then spins 0.3 s in parent_loop.
sp_tree.py pair_a DIR / pair_b DIR
    spin in pair_a_spin / pair_b_spin until DIR/stop exists.
sp_tree.py adopt DIR
    parent: forks two children that spin in adopted_child_spin until DIR/stop
    exists, and spins in parent_loop until then.
"""
import os
import subprocess
import sys
import time

SHELL_LOOP = "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done"
QUICK_SHELLS = 40
TINY_CHILDREN = 20


def mark(directory, role, extra="", pid=None):
    path = os.path.join(directory, f"{role}.{pid or os.getpid()}")
    with open(path + ".tmp", "w") as f:
        f.write("%d.%d.%d\n%s" % (sys.version_info[:3] + (extra,)))
    os.rename(path + ".tmp", path)


def wait_for(directory, name):
    while not os.path.exists(os.path.join(directory, name)):
        time.sleep(0.005)


def stopped(directory):
    return os.path.exists(os.path.join(directory, "stop"))


def parent_loop(secs):
    t0 = time.thread_time()
    while time.thread_time() - t0 < secs:  # LINE:parent_loop
        pass


def parent_after_exit(secs):
    t0 = time.thread_time()
    while time.thread_time() - t0 < secs:  # LINE:parent_after_exit
        pass


def child_315_spin(secs):
    t0 = time.thread_time()
    while time.thread_time() - t0 < secs:  # LINE:child_315_spin
        pass


def grandchild_spin(secs):
    t0 = time.thread_time()
    while time.thread_time() - t0 < secs:  # LINE:grandchild_spin
        pass


def short_child_spin(secs):
    t0 = time.thread_time()
    while time.thread_time() - t0 < secs:  # LINE:short_child_spin
        pass


def tiny_child_spin(secs):
    t0 = time.thread_time()
    while time.thread_time() - t0 < secs:  # LINE:tiny_child_spin
        pass


def pair_a_spin(directory):
    while not stopped(directory):  # LINE:pair_a_spin
        pass


def pair_b_spin(directory):
    while not stopped(directory):  # LINE:pair_b_spin
        pass


def adopted_child_spin(directory):
    while not stopped(directory):  # LINE:adopted_child_spin
        pass


def tree(directory, go, child_exe, grand_exe):
    mark(directory, "parent")
    if go == "wait":
        wait_for(directory, "go")
    child = subprocess.Popen([child_exe, __file__, "child_315", directory, grand_exe])
    parent_loop(0.4)
    if child.wait():
        sys.exit("child_315 failed")


def child_315(directory, grand_exe):
    mark(directory, "child_315")
    grand = subprocess.Popen([grand_exe, __file__, "grandchild", directory])
    child_315_spin(0.4)
    if grand.wait():
        sys.exit("grandchild failed")


def grandchild(directory):
    mark(directory, "grandchild")
    grandchild_spin(0.4)


def short(directory):
    mark(directory, "parent")
    wait_for(directory, "go")
    pid = os.fork()
    if pid == 0:
        try:
            mark(directory, "short_child")
            short_child_spin(0.3)
            mark(directory, "short_child", "exit %d\n" % time.monotonic_ns())
        finally:
            os._exit(0)
    while os.waitpid(pid, os.WNOHANG) == (0, 0):
        parent_loop(0.01)
    parent_after_exit(0.4)


def tiny(directory):
    mark(directory, "parent")
    wait_for(directory, "go")
    for _ in range(TINY_CHILDREN):
        pid = os.fork()
        if pid == 0:
            try:
                mark(directory, "tiny_child")
                tiny_child_spin(0.01)
            finally:
                os._exit(0)
        os.waitpid(pid, 0)


def shell(directory):
    mark(directory, "parent")
    wait_for(directory, "go")
    c0, t0 = time.process_time(), time.monotonic_ns()
    p = subprocess.Popen(["sh", "-c", SHELL_LOOP])
    p.wait()
    t1, c1 = time.monotonic_ns(), time.process_time()
    mark(directory, "sh", "%d %d %.6f\n" % (t0, t1, c1 - c0), pid=p.pid)
    if p.returncode:
        sys.exit("sh failed")
    # Many short ones: a tick between a child's vfork() and its exec() is
    # likely in one of them.
    quick = []
    for _ in range(QUICK_SHELLS):
        q = subprocess.Popen(["sh", "-c", ":"])
        quick.append(q.pid)
        if q.wait():
            sys.exit("sh -c : failed")
    for pid in quick:
        mark(directory, "sh_quick", pid=pid)
    parent_loop(0.3)


def pair(directory, role):
    mark(directory, role)
    (pair_a_spin if role == "pair_a" else pair_b_spin)(directory)


def adopt(directory):
    for _ in range(2):
        if os.fork() == 0:
            try:
                mark(directory, "adopted_child")
                adopted_child_spin(directory)
            finally:
                os._exit(0)
    mark(directory, "parent")
    while not stopped(directory):
        parent_loop(0.01)
    os.wait()
    os.wait()


def main():
    mode, directory, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    if mode == "tree":
        tree(directory, *args)
    elif mode == "child_315":
        child_315(directory, *args)
    elif mode == "grandchild":
        grandchild(directory)
    elif mode == "short":
        short(directory)
    elif mode == "tiny":
        tiny(directory)
    elif mode == "shell":
        shell(directory)
    elif mode in ("pair_a", "pair_b"):
        pair(directory, mode)
    elif mode == "adopt":
        adopt(directory)
    else:
        sys.exit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()

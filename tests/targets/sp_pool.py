"""A multiprocessing pool that tests/test_subprocesses.py records with
`pyprof-bpf record -p PID --subprocesses`.

sp_pool.py DIR METHOD: every process of ours writes DIR/ROLE.PID (its Python
version inside) when it starts: the parent "parent", each pool worker
"pool_worker" (from the pool's initializer, so an idle worker is known too).
The parent waits for DIR/go (the recorder attached), makes a Pool(2) with the
start method METHOD (fork, spawn, forkserver), maps pool_worker_fn over 4
items (each spins 0.25 s of CPU in pool_worker_fn itself), writes the pids
that ran a task to DIR/tasks, spins 0.3 s in parent_loop and exits.
"""
import multiprocessing
import os
import sys
import time

WORKER_CPU = 0.25
PARENT_CPU = 0.3


def mark(directory, role):
    path = os.path.join(directory, f"{role}.{os.getpid()}")
    with open(path + ".tmp", "w") as f:
        f.write("%d.%d.%d\n" % sys.version_info[:3])
    os.rename(path + ".tmp", path)


def pool_worker_fn(n):
    t0 = time.thread_time()
    while time.thread_time() - t0 < WORKER_CPU:  # LINE:pool_worker_fn
        pass
    return os.getpid()


def parent_loop():
    t0 = time.thread_time()
    while time.thread_time() - t0 < PARENT_CPU:  # LINE:parent_loop
        pass


def main():
    directory, method = sys.argv[1], sys.argv[2]
    mark(directory, "parent")
    while not os.path.exists(os.path.join(directory, "go")):
        time.sleep(0.005)
    ctx = multiprocessing.get_context(method)
    with ctx.Pool(2, initializer=mark, initargs=(directory, "pool_worker")) as pool:
        ran = pool.map(pool_worker_fn, range(4), chunksize=1)
    with open(os.path.join(directory, "tasks.tmp"), "w") as f:
        f.write(" ".join(map(str, sorted(set(ran)))) + "\n")
    os.rename(os.path.join(directory, "tasks.tmp"), os.path.join(directory, "tasks"))
    parent_loop()


if __name__ == "__main__":
    main()

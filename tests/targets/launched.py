"""A command that tests/test_launch.py starts through `pyprof-bpf -- CMD`.

launched.py MODE [ARGS...]:
  exit N           exit with status N
  kill SIG         kill itself with signal number SIG
  echo ARGS...     print its arguments, then standard input upper-cased, on
                   stdout; "to stderr" on stderr
  ids              print {"uid", "gid", "groups", "env"} as JSON
  count            count the SIGINTs and SIGTERMs it gets: print "ready" once
                   its handlers are set, spin until the first one, spin 0.3 s
                   of CPU more in after_signal(), exit 20 + the count
  interrupt        print "ready", spin with Python's own SIGINT handling (an
                   uncaught KeyboardInterrupt: it dies of SIGINT)
  spin SECS [N]    spin SECS of CPU in spin_for(), print "done", exit N
"""
import json
import os
import signal
import sys
import time

got = []


def spin_for(secs):
    t0 = time.thread_time()
    while time.thread_time() - t0 < secs:
        pass


def after_signal():
    spin_for(0.3)  # LINE:after


def main():
    mode, args = sys.argv[1], sys.argv[2:]
    if mode == "exit":
        sys.exit(int(args[0]))
    if mode == "kill":
        os.kill(os.getpid(), int(args[0]))
        time.sleep(10)
        sys.exit("still alive")
    if mode == "echo":
        print(json.dumps(args))
        sys.stdout.write(sys.stdin.read().upper())
        sys.stderr.write("to stderr\n")
        return
    if mode == "ids":
        print(json.dumps({"uid": os.getuid(), "gid": os.getgid(),
                          "groups": sorted(os.getgroups()),
                          "env": {k: os.environ.get(k) for k in ("HOME", "USER", "LOGNAME")}}))
        return
    if mode == "count":
        for s in (signal.SIGINT, signal.SIGTERM):
            signal.signal(s, lambda sig, frame: got.append(sig))
        print("ready", flush=True)
        while not got:
            pass
        after_signal()
        sys.exit(20 + len(got))
    if mode == "interrupt":
        print("ready", flush=True)
        while True:
            pass
    if mode == "spin":
        spin_for(float(args[0]))
        print("done", flush=True)
        sys.exit(int(args[1]) if len(args) > 1 else 0)
    sys.exit(f"unknown mode {mode}")


main()

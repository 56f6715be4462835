# The first statement spins for 200 ms of CPU: started by `pyprof-bpf -- CMD`,
# it is sampled from its start (tests/test_launch.py).
while __import__("time").thread_time() - globals().setdefault("T0", __import__("time").thread_time()) < 0.2:  # LINE:spin
    pass  # LINE:pass
print("done")

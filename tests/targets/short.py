# A program that runs for 50 ms, all of it in its module body: started by
# `pyprof-bpf -- CMD`, it is sampled there (tests/test_launch.py).
import time

t0 = time.thread_time()
while time.thread_time() - t0 < 0.05:  # LINE:spin
    pass

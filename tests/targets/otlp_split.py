"""test_otlp.py's workload: hot() takes about three quarters of the CPU and
warm() one quarter, by construction (each round calls both; hot() loops
three times as long), until killed. Prints "ready" once it runs."""
import sys


def hot():
    x = 0
    for i in range(300_000):
        x += i
    return x


def warm():
    x = 0
    for i in range(100_000):
        x += i
    return x


print("ready", flush=True)
sys.stdout.close()
while True:
    hot()
    warm()

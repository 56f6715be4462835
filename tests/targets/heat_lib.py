"""The hot line of tests/targets/heat_main.py, in a file of its own."""


def hot(n):
    return sum([i * i for i in range(n)])  # HOT

"""Which interpreters a test runs on: all supported ones, one per minor version, the
asyncio-capable ones, or one by label."""
import pytest

from lib import pyenvs


SUPPORTED = pyenvs.supported()


def by_label(label):
    for i in pyenvs.load():
        if i.label == label:
            return i
    pytest.fail(f"interpreter {label!r} is not in {pyenvs.LIST}: run "
                f"scripts/provision-pythons.sh")


def pick(pred, what):
    for i in SUPPORTED:
        if pred(i):
            return i
    raise RuntimeError(f"no test interpreter for {what} in {pyenvs.LIST}")


def one_per_version():
    """The first interpreter of each minor version (debug builds aside)."""
    by = {}
    for i in SUPPORTED:
        if not i.label.endswith("d"):
            by.setdefault(i.version[:2], i)
    return by


VERSIONS = one_per_version()
PARAMS = [pytest.param(VERSIONS[v], id=VERSIONS[v].label) for v in sorted(VERSIONS)]
ASYNC = [pytest.param(i, id=i.label) for i in SUPPORTED
         if i.version[:2] >= (3, 14) and not i.label.endswith("d")]

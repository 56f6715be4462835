"""Helpers the test modules share: the binary, the interpreters, targets, recordings,
parsers of what pyprof-bpf writes. A test module imports from here, never from another
test module; fixtures live in tests/conftest.py."""

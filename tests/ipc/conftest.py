# SPDX-License-Identifier: MIT
"""pytest's fixtures for the IPC tests (harness.py holds the helpers they share).

CTest runs one test per process (tests/CMakeLists.txt: ipc.NAME is `pytest FILE::test_NAME`,
label ipc, with the paths of the build in its environment). By hand, from the repository root
after a build in build/ (the paths' defaults): `python3 -m pytest tests/ipc/test_errors.py` or
`python3 -m pytest tests/ipc` (all, one after another, in one process).
"""
import pytest

from harness import Env


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Keeps the outcome of the test's own body for the fixtures' teardown (`daemon`)."""
    outcome = yield
    rep = outcome.get_result()
    if rep.when == "call":
        item.om_passed = rep.passed


@pytest.fixture
def daemon(request):
    """Makes daemons: daemon(extra_env=None, start=True, root_dir=None) is an Env, its daemon
    started unless start=False, in fresh pipe and log directories; the driver double is its
    servers' driver. When the test ends each is closed: the daemon told to quit, every process
    it ran killed, and their stderr read for sanitizer reports; a test that passed also fails if
    a daemon does not quit or a report is found, and its directories are removed (a failed
    test's are kept for reading)."""
    made = []

    def make(extra_env=None, start=True, root_dir=None):
        e = Env(extra_env, start=False, root_dir=root_dir)
        made.append(e)  # closed even when its start fails
        if start:
            e.start()
        return e

    yield make
    ok = getattr(request.node, "om_passed", False)
    first = None
    for e in made:
        try:
            e.close(ok)
        except Exception as ex:  # every daemon is closed; the first failure is reported
            first = first or ex
    if first:
        raise first

# SPDX-License-Identifier: MIT
"""The pytest plugin of the suites harness (tests/gpu/suites/suites.py): loaded with
`-p omsuite_plugin` into each pytest process the harness starts, it writes one JSON line per
event to the file OMSUITE_RESULTS names, flushed at once, so that whatever ends the process (a
crash, the server ending the client, the harness's deadline) the tests finished before it are
known, and the one in progress is the last `start` without its `end`:

  {"t": "collected", "n": N}                 tests left to run after the filters below
  {"t": "start", "id": NODEID}
  {"t": "end", "id": NODEID, "outcome": O, "dur": S, "msg": TEXT}
  {"t": "finished", "status": EXIT}          pytest ended normally

O is passed, failed, error, skipped, xfailed, xpassed or timeout. A module that cannot be
collected gets an `end` of its own (outcome error, its node id).

PyTorch's test files come from its main branch, a little ahead of the installed wheel: a name
they import from `torch.*` that the installed version lacks (test_cuda.py's
`TEST_CUDAMALLOCASYNC` from common_utils) would fail the whole file's collection, in both modes.
Before a test file is imported, such names are filled in its modules (`_fill_missing`): a flag
(an upper-case name) by its definition where known, else False; a known decorator by what it
does outside Meta's CI (skipIfSandcastle: nothing); anything else by a stand-in that skips the
test it decorates or is called in. Each filled name is written as

  {"t": "filled", "file": PATH, "names": ["module.NAME", ...]}

so that the report can say so; native and openmps runs get the same. Environment:

  OMSUITE_RESULTS  the file (appended)
  OMSUITE_SKIP     a file of node ids, one a line, not to run (done by an earlier process)
  OMSUITE_ONLY     a file of node ids: run only these (the harness's re-runs)
  OMSUITE_TIMEOUT  seconds one test (setup, call, teardown) may take; past it the test's `end`
                   says timeout, every thread's stack goes to stderr and the process exits 86
"""
import ast
import faulthandler
import importlib
import json
import os
import sys
import threading
import time

import unittest

import pytest

TIMEOUT_EXIT = 86
_out = None
_lock = threading.Lock()
_state = {}  # nodeid -> [outcome, msg]
_started = {}  # nodeid -> monotonic start
_timer = None


def _write(rec):
    global _out
    with _lock:
        if _out is None:
            _out = open(os.environ["OMSUITE_RESULTS"], "a", buffering=1)
        _out.write(json.dumps(rec) + "\n")
        _out.flush()


def _ids(var):
    path = os.environ.get(var)
    if not path:
        return None
    with open(path) as f:
        return {line.rstrip("\n") for line in f if line.strip()}


def _message(report):
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None and getattr(crash, "message", None):
        text = crash.message
    elif isinstance(report.longrepr, tuple):  # a skip: (file, line, reason)
        text = str(report.longrepr[-1])
    else:
        text = str(report.longrepr or "").strip().splitlines()[-1:] or [""]
        text = text[0]
    return text.strip()[:300]


def pytest_configure(config):
    if not os.environ.get("OMSUITE_RESULTS"):
        raise pytest.UsageError("omsuite_plugin: OMSUITE_RESULTS (the results file) is not set")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session, config, items):
    skip, only = _ids("OMSUITE_SKIP"), _ids("OMSUITE_ONLY")
    keep, drop = [], []
    for item in items:
        if (skip is not None and item.nodeid in skip) or (only is not None and item.nodeid not in only):
            drop.append(item)
        else:
            keep.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
    _write({"t": "collected", "n": len(items)})


# ---- names a newer test file imports that the installed torch lacks ----

def _known_flag(module, name):
    """A flag's value as later versions define it, else False (the feature taken as absent)."""
    if name == "TEST_CUDAMALLOCASYNC":  # the allocator backend in use is the asynchronous one
        import torch
        return bool(torch.cuda.is_available() and
                    torch.cuda.get_allocator_backend() == "cudaMallocAsync")
    return False


class _Absent:
    """Stands in for a function, decorator or class the installed torch lacks. A test that it
    decorates, directly or through a factory's result (`@absent()`), is skipped; what a call of
    it in a test body returns skips that test when it is used (called, iterated, an attribute
    read); it is false, so `skipIf(not absent(...))` skips too. Raising at the call itself is not
    possible: a factory is called when the module is imported, where a skip would skip the whole
    file."""

    def __init__(self, name):
        object.__setattr__(self, "_why", "%s is not in the installed torch (suites harness)" % name)

    def _skip(self, target):
        why = self._why
        if isinstance(target, type):
            target.__unittest_skip__ = True
            target.__unittest_skip_why__ = why
            return target

        def skipped(*args, **kwargs):
            raise unittest.SkipTest(why)
        skipped.__name__ = getattr(target, "__name__", "skipped")
        skipped.__qualname__ = getattr(target, "__qualname__", skipped.__name__)
        return skipped

    def __call__(self, *args, **kwargs):
        if len(args) == 1 and not kwargs and callable(args[0]) and not isinstance(args[0], _Absent):
            return self._skip(args[0])
        return self  # a factory's result, or a value: it decorates or skips when used

    def __bool__(self):
        return False

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        raise unittest.SkipTest(self._why)

    def __iter__(self):
        raise unittest.SkipTest(self._why)


def _not_in_sandcastle(*args, **kwargs):
    """skipIfSandcastle: skips only in Meta's own CI (Sandcastle), never here: a no-op, used
    bare or with a reason."""
    if len(args) == 1 and not kwargs and callable(args[0]):
        return args[0]
    return lambda f: f


_KNOWN_CALLABLES = {"skipIfSandcastle": _not_in_sandcastle}


def _fill_missing(path):
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), filename=str(path))
    except (OSError, SyntaxError, ValueError):
        return
    filled = []
    # the module's own imports (also under a module-level if or try), not those in functions:
    # a test that imports inside its body finds out what the installed torch has, as natively
    nodes, top = [], list(tree.body)
    while top:
        n = top.pop(0)
        nodes.append(n)
        if isinstance(n, (ast.If, ast.Try)):
            top += n.body + n.orelse + getattr(n, "finalbody", []) + [
                x for h in getattr(n, "handlers", []) for x in h.body]
    for node in nodes:
        if not (isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and
                (node.module == "torch" or node.module.startswith("torch."))):
            continue
        try:
            mod = importlib.import_module(node.module)
        except Exception:  # a module the installed torch lacks: collection says so
            continue
        for alias in node.names:
            n = alias.name
            if n == "*" or hasattr(mod, n):
                continue
            try:
                importlib.import_module(node.module + "." + n)  # a submodule
                continue
            except Exception:
                pass
            setattr(mod, n, _known_flag(node.module, n) if n.isupper() else
                    _KNOWN_CALLABLES.get(n) or _Absent(n))
            filled.append(node.module + "." + n)
    if filled:
        _write({"t": "filled", "file": str(path), "names": sorted(set(filled))})


def pytest_collect_file(file_path, parent):
    # pytest asks about every file of the folder; only the file the harness named is imported
    if (file_path.suffix == ".py" and file_path.name.startswith("test_") and
            parent.session.isinitpath(file_path)):
        _fill_missing(file_path)
    return None


def pytest_collectreport(report):
    if report.failed:
        _write({"t": "end", "id": report.nodeid, "outcome": "error", "dur": 0.0,
                "msg": "collection: " + _message(report)})


def _expire(nodeid, limit):
    _write({"t": "end", "id": nodeid, "outcome": "timeout", "dur": float(limit),
            "msg": "took more than %g s" % limit})
    sys.stderr.write("\nomsuite: %s took more than %g s; the threads' stacks:\n" % (nodeid, limit))
    sys.stderr.flush()
    faulthandler.dump_traceback(all_threads=True)
    os._exit(TIMEOUT_EXIT)


def pytest_runtest_logstart(nodeid, location):
    global _timer
    _state[nodeid] = ["passed", ""]
    _started[nodeid] = time.monotonic()
    _write({"t": "start", "id": nodeid})
    limit = float(os.environ.get("OMSUITE_TIMEOUT", "0") or 0)
    if limit > 0:
        _timer = threading.Timer(limit, _expire, (nodeid, limit))
        _timer.daemon = True
        _timer.start()


def pytest_runtest_logreport(report):
    st = _state.setdefault(report.nodeid, ["passed", ""])
    xfail = hasattr(report, "wasxfail")
    if report.when == "call":
        # several call reports come for a test with subtests (pytest 9, unittest's subTest):
        # one that failed decides
        if st[0] == "failed":
            return
        if report.passed:
            st[0] = "xpassed" if xfail else "passed"
        elif report.skipped:
            st[0] = "xfailed" if xfail else "skipped"
        else:
            st[0] = "failed"
        if not report.passed:
            st[1] = _message(report)
    elif report.failed:  # setup or teardown
        if st[0] != "failed":
            st[0], st[1] = "error", report.when + ": " + _message(report)
    elif report.skipped and report.when == "setup":
        st[0], st[1] = ("xfailed" if xfail else "skipped"), _message(report)


def pytest_runtest_logfinish(nodeid, location):
    global _timer
    if _timer is not None:
        _timer.cancel()
        _timer = None
    outcome, msg = _state.pop(nodeid, ["passed", ""])
    dur = time.monotonic() - _started.pop(nodeid, time.monotonic())
    _write({"t": "end", "id": nodeid, "outcome": outcome, "dur": round(dur, 3), "msg": msg})


def pytest_sessionfinish(session, exitstatus):
    _write({"t": "finished", "status": int(exitstatus)})

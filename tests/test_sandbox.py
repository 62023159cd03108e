"""Tests for the sandbox's containment (sandbox/: checker.py, guards.py, worker.py, host.py): the
adversarial corpus is caught without harm to this process, legitimate code still runs, the checker
rejects what it must, and errors point at the model's own lines. The budgets and the trainer-side
protocol are tests/test_sandbox_budgets.py's; the worker process's own life (replaced on overrun or
crash, never outliving its trainer) is tests/test_sandbox_worker.py's.

    python -m pytest -q tests/test_sandbox.py
"""

import builtins
import os
import signal
import sys
import time

import pytest

from sandbox import checker, guards, host, limits
from sandbox.checker import SandboxError
from tests.adversarial_corpus import CORPUS
from tests.sandbox_helpers import CANARY, FakeApi, _run, hang_guard, worker_fixture  # noqa: F401 - fixtures


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def test_corpus_is_big_enough():
    assert len(CORPUS) >= 130
    assert len({case.name for case in CORPUS}) == len(CORPUS)
    assert sum(case.expect == ("check",) for case in CORPUS) >= 20
    assert sum(case.expect != ("check",) for case in CORPUS) >= 20


def test_adversarial_corpus_is_contained(worker):
    """Every snippet goes the fast loop's way (check here, then a run in the worker) and gets its
    expected outcome within its budget; this process is unharmed and its memory does not grow."""
    _run(worker, CANARY)
    builtins_before, modules_before, trace = dict(vars(builtins)), set(sys.modules), sys.gettrace()
    rss_before, wrong = _rss_mb(), []
    budget = 1.0 + host.KILL_AFTER_S + 1.0  # the time limit, the kill's grace, a restart
    for case in CORPUS:
        signal.setitimer(signal.ITIMER_REAL, 20)  # hang_guard's 20 s, per snippet
        start = time.perf_counter()
        try:
            checker.check(case.source, "act")
        except SandboxError as e:
            outcome, log = "check", []
            assert e.lineno is None or 1 <= e.lineno <= case.source.count("\n"), case.name
        else:
            result = worker.run(case.source, "act", FakeApi())
            outcome = result.stopped or ("error" if result.error else f"returned {result.returned!r}")
            log = result.log
        took = time.perf_counter() - start
        if outcome not in case.expect or took > budget:
            wrong.append(f"{case.name}: {outcome} in {took:.1f} s, expected {case.expect}")
        assert sum(len(line) for line in log) <= limits.MAX_LOG_CHARS + 100
        assert dict(vars(builtins)) == builtins_before and set(sys.modules) == modules_before
        assert sys.gettrace() is trace and sys.exc_info() == (None, None, None)
    assert not wrong, "\n".join(wrong)
    assert _rss_mb() - rss_before < 200
    canary = _run(worker, CANARY)
    assert (canary.returned, canary.error, canary.stopped) == (True, None, None)


def test_legitimate_code_runs(worker):
    result = _run(worker, '''
        """Walks a few steps, with helpers, loops, comprehensions and handled errors."""


        def double(x: int) -> int:
            return x * 2


        def act(api) -> bool:
            total, counts = 0, {}
            for i in range(4):
                total += double(i)
                counts["even" if i % 2 == 0 else "odd"] = counts.get("odd", 0) + 1
            try:
                int("not a number")
            except (ValueError, KeyError) as e:
                print(f"ignored: {e}")
            names = sorted(["b", "a"], key=lambda s: s)
            grid = api.grid()
            print("-".join(names), str(total), f"{total / 4:.2f}", isinstance("x", str), grid)
            while api.step() < 2:
                pass
            return total == 12 and grid[1][2] == 5 and isinstance(grid, list) and len(counts) == 2
    ''')
    assert (result.returned, result.error, result.stopped) == (True, None, None)
    assert result.log == ["ignored: invalid literal for int() with base 10: 'not a number'",
                          "a-b 12 3.00 True [[0, 1, 2], [3, 4, 5]]"]


def test_runtime_error_reports_the_models_line_and_text(worker):
    result = _run(worker, """
        def act(api):
            a = 1
            x = a / 0
            return True
    """)
    assert result.lineno == 3
    assert result.error.startswith("line 3: ZeroDivisionError: division by zero")
    assert result.error.splitlines()[1].strip() == "x = a / 0"
    assert result.stopped is None


def test_error_in_helper_reports_the_helper_line(worker):
    result = _run(worker, """
        def pick(cells):
            return cells[10]

        def act(api):
            return pick([1, 2, 3])
    """)
    assert result.lineno == 2 and "IndexError" in result.error and "return cells[10]" in result.error


def test_check_rejects_with_the_models_line():
    with pytest.raises(SandboxError) as info:
        checker.check("def act(api):\n    x = 1\n    import os\n    return True\n", "act")
    assert info.value.lineno == 3 and str(info.value).startswith("line 3: ")
    with pytest.raises(SandboxError, match="exactly one function"):
        checker.check("def other(api):\n    return True\n", "act")
    with pytest.raises(SandboxError, match="SyntaxError"):
        checker.check("def act(api):\n    return (\n", "act")


def test_the_budget_checks_cannot_be_named_by_the_code():
    """The checks compiled into the code are globals the code could call, rebind or shadow, were it
    allowed to write their names."""
    for name in guards._CHECKS:
        for body in (f"{name}()", f"{name} = print", f"return {name}", f"{name}: int = 0",
                     f"for {name} in range(3):\n        pass", f"return [1 for {name} in range(3)]"):
            with pytest.raises(SandboxError, match="names starting with '_'"):
                checker.check(f"def act(api):\n    {body}\n", "act")
        with pytest.raises(SandboxError):
            checker.check(f"def act(api, {name}=1):\n    return True\n", "act")


def test_errors_inside_loops_and_lambdas_report_the_models_lines(worker):
    result = _run(worker, """
        def act(api):
            total = 0
            for i in range(3):
                total += [1, 2][i]
            return total
    """)
    assert result.lineno == 4 and result.error.startswith("line 4: IndexError")
    result = _run(worker, """
        def act(api):
            f = lambda x: 1 / x
            return sorted([1, 0], key=f)
    """)
    assert result.lineno == 2 and result.error.splitlines()[1].strip() == "f = lambda x: 1 / x"


def test_code_called_outside_run_cannot_print():
    fn = checker.compile_action("def act(api):\n    print('hi')\n", "act")
    with pytest.raises(RuntimeError, match="sandbox.worker.run"):
        fn(None)


def test_check_reports_compiler_errors_with_their_line():
    for body, message in [("    x = 1\n    continue\n", "'continue' not properly in loop"),
                          ("    return dict(a=1, a=2)\n", "keyword argument repeated"),
                          ("    *a = [1]\n    return a\n", "starred assignment target")]:
        source = "def act(api):\n" + body
        with pytest.raises(SandboxError, match=message) as info:
            checker.check(source, "act")
        assert info.value.lineno == source.count("\n") - (1 if "return a\n" in body else 0)

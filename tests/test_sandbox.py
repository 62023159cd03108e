"""Tests for the sandbox (sandbox.py, sandbox_worker.py, sandbox_host.py): the adversarial corpus is
caught without harm to this process, legitimate code still runs, errors point at the model's own lines,
api stops cannot be swallowed, env steps are off the code's clock and every other api call on it, a
worker that overruns or dies is replaced while the trainer carries on, and a worker never outlives its
trainer nor sees the trainer's environment.

    python -m pytest -q tests/test_sandbox.py
"""

import builtins
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from textwrap import dedent

import numpy as np
import pytest

import env as E
import sandbox
import sandbox_host
import sandbox_worker
from sandbox import SandboxError
from tests.adversarial_corpus import CORPUS


class Secret:
    """Stands for an env object that must never reach model code."""

    def steal(self) -> str:
        return "stolen"


class FakeApi:
    """A tiny primitive API: step() spends a budget and raises the sandbox's StepBudgetExceeded. It
    counts its env steps in `_steps` and their time in `_env_time`, as core.PrimitiveAPI does."""

    def __init__(self, budget: int = 5, sleep: float = 0.0):
        self._budget, self._sleep, self._steps, self._env_time = budget, sleep, 0, 0.0
        self.secret = Secret()
        self._nested, self._flat = [[1, 2], [3, 4]], [1, 2]
        self.traces: list[object] = []

    def step(self) -> int:
        if self._steps >= self._budget:
            raise sandbox.StepBudgetExceeded(f"budget of {self._budget} steps spent")
        self._steps += 1
        return self._steps

    def end(self) -> None:
        raise sandbox.EpisodeEnded()

    def leak(self) -> None:
        raise ValueError(Secret())

    def slow(self) -> bool:
        """Sleeps like a slow env step (counted as one, as core.PrimitiveAPI counts them), and records
        which tracer is active in api code."""
        self.traces.append(sys.gettrace())
        start = time.perf_counter()
        time.sleep(self._sleep)
        self._steps += 1
        self._env_time += time.perf_counter() - start
        return True

    def query(self, i: int = 0) -> int:
        """A call that takes no env step but its time (a slow view() on a loaded machine)."""
        time.sleep(self._sleep)
        return self._steps

    def grid(self) -> np.ndarray:
        return np.arange(6, dtype=np.int64).reshape(2, 3)

    def targets(self, nested: bool) -> list:
        """Returns internal state, which model code must not be able to change through the result."""
        self.traces.append(nested)
        return self._nested if nested else self._flat


class Hang(BaseException):
    """Raised by the hang guard; a BaseException so that no model `except` can catch it."""


@pytest.fixture(autouse=True)
def hang_guard():
    """A sandbox that fails to stop the code would hang the suite: turn that into a failure instead."""
    def fail(signum, frame):
        raise Hang("the sandbox did not stop the code within 20 s")

    previous = signal.signal(signal.SIGALRM, fail)
    signal.setitimer(signal.ITIMER_REAL, 20)
    yield
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, previous)


CANARY = """
def act(api):
    n = 0
    while api.step() < 3:
        n += 1
    return n == 2
"""


@pytest.fixture(scope="module")
def worker():
    """One worker for the file, as an env has one: each test also shows that it survived the last."""
    w = sandbox_host.Worker()
    yield w
    w.close()


def _run(worker: sandbox_host.Worker, source: str, api: object | None = None, entry: str = "act",
         **kwargs) -> sandbox.RunResult:
    return worker.run(dedent(source).lstrip("\n"), entry, api or FakeApi(), **kwargs)


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
    budget = 1.0 + sandbox_host.KILL_AFTER_S + 1.0  # the time limit, the kill's grace, a restart
    for case in CORPUS:
        signal.setitimer(signal.ITIMER_REAL, 20)  # hang_guard's 20 s, per snippet
        start = time.perf_counter()
        try:
            sandbox.check(case.source, "act")
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
        assert sum(len(line) for line in log) <= sandbox.MAX_LOG_CHARS + 100
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
        sandbox.check("def act(api):\n    x = 1\n    import os\n    return True\n", "act")
    assert info.value.lineno == 3 and str(info.value).startswith("line 3: ")
    with pytest.raises(SandboxError, match="exactly one function"):
        sandbox.check("def other(api):\n    return True\n", "act")
    with pytest.raises(SandboxError, match="SyntaxError"):
        sandbox.check("def act(api):\n    return (\n", "act")


def test_step_budget_in_api_cannot_be_swallowed(worker):
    api = FakeApi(budget=3)
    result = _run(worker, """
        def act(api):
            while True:
                try:
                    api.step()
                except Exception:
                    pass
    """, api)
    assert result.stopped == "step_budget" and result.error is None
    assert api._steps == 3 and result.lineno == 4


def test_interrupts_are_not_exceptions():
    for stop in (sandbox.StepBudgetExceeded, sandbox.EpisodeEnded, sandbox.TimeBudgetExceeded):
        assert issubclass(stop, sandbox.Interrupt) and not issubclass(stop, Exception)


def test_time_inside_env_steps_is_not_counted(worker):
    api = FakeApi(sleep=0.15)
    start = time.perf_counter()
    result = _run(worker, """
        def act(api):
            for _ in range(4):
                api.slow()
            return True
    """, api, time_limit=0.3)
    assert time.perf_counter() - start > 0.6  # the api slept for twice the time limit ...
    assert (result.returned, result.stopped) == (True, None)  # ... and the code was not stopped
    assert api.traces == [None] * 4  # the sandbox's tracer is off inside api code


def test_a_loop_of_api_calls_that_take_no_step_is_stopped_by_the_time_budget(worker):
    """Such calls are on the code's clock: a loop waiting on a slowed api stops at the time limit, not
    after some count of calls (2000 of these 5 ms calls would take 10 s)."""
    start = time.perf_counter()
    result = _run(worker, """
        def act(api):
            i = 0
            while api.query(i) < 1:  # each call differs, so none is answered by the worker's memo
                i += 1
    """, FakeApi(sleep=0.005), time_limit=0.3)
    took = time.perf_counter() - start
    assert result.stopped == "time_budget" and "0.3 s" in result.error and result.lineno in (2, 3), result
    assert took < 0.3 + sandbox_host.KILL_AFTER_S


def test_time_budget_still_applies_after_api_calls(worker):
    start = time.perf_counter()
    result = _run(worker, """
        def act(api):
            api.slow()
            while True:
                sorted(range(200000))  # slow lines: the time budget, not the line budget, stops this
    """, FakeApi(sleep=0.2), time_limit=0.3)
    assert result.stopped == "time_budget" and "0.3 s" in result.error and result.lineno in (3, 4)
    assert 0.45 < time.perf_counter() - start < 1.5


def test_iteration_budget_stops_fast_endless_loops(worker):
    for loop in ("while True:\n        pass", "return len([i for i in range(10 ** 5) if i < 0])",
                 "def f(n):\n        return n\n    while True:\n        f(1)"):
        start = time.perf_counter()
        result = _run(worker, f"def act(api):\n    {loop}\n", time_limit=10.0)
        assert result.stopped == "time_budget" and f"more than {sandbox.MAX_ITERATIONS} loop" in result.error
        assert time.perf_counter() - start < 2.0 and result.lineno in (2, 3, 4), result


def test_the_budget_checks_cannot_be_named_by_the_code():
    """The checks compiled into the code are globals the code could call, rebind or shadow, were it
    allowed to write their names."""
    for name in sandbox._CHECKS:
        for body in (f"{name}()", f"{name} = print", f"return {name}", f"{name}: int = 0",
                     f"for {name} in range(3):\n        pass", f"return [1 for {name} in range(3)]"):
            with pytest.raises(SandboxError, match="names starting with '_'"):
                sandbox.check(f"def act(api):\n    {body}\n", "act")
        with pytest.raises(SandboxError):
            sandbox.check(f"def act(api, {name}=1):\n    return True\n", "act")


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


def test_calls_that_raise_give_their_depth_back(worker):
    """500 failing calls, each caught: the depth each took must be given back, or the 201st would stop."""
    result = _run(worker, """
        def fail(x):
            return 1 / x

        def act(api):
            g = lambda x: 1 / x
            for _ in range(500):
                for f in [fail, g]:
                    try:
                        f(0)
                    except ZeroDivisionError:
                        pass
            return True
    """)
    assert (result.returned, result.error) == (True, None)


def test_outer_tracer_is_kept_and_used_inside_api_calls(worker):
    """A coverage tool's tracer (set for new threads too) still sees env code run by code actions."""
    def outer(frame, event, arg):
        return None

    api = FakeApi()
    sys.settrace(outer)
    threading.settrace(outer)
    try:
        result = _run(worker, "def act(api):\n    return api.slow()\n", api)
        after = sys.gettrace()
    finally:
        sys.settrace(None)
        threading.settrace(None)
    assert result.returned is True and after is outer and api.traces == [outer]


def test_api_proxy_is_read_only_and_plain(worker):
    result = _run(worker, """
        def act(api):
            return [api.grid(), api.step()]
    """)
    assert result.returned == [[[0, 1, 2], [3, 4, 5]], 1]
    assert type(result.returned[0][0][0]) is int
    api = FakeApi()
    result = _run(worker, """
        def act(api):
            nested, flat = api.targets(True), api.targets(nested=False)
            nested[0][0] = 99
            flat.append(3)
            return [nested, flat]
    """, api)
    assert result.returned == [[[99, 2], [3, 4]], [1, 2, 3]]
    assert api.targets(True) == [[1, 2], [3, 4]] and api.targets(False) == [1, 2]
    proxy = sandbox_worker._ApiProxy(("step",), None)
    with pytest.raises(AttributeError):
        proxy.step = None
    with pytest.raises(AttributeError):
        del proxy.step
    with pytest.raises(AttributeError):
        proxy._budget  # noqa: B018 - the access itself is the test


def test_a_call_repeated_between_env_steps_is_answered_once(worker):
    """A call that took no env step changed nothing, so the same call again, before the next step,
    gets the same answer: from the worker's memo, as a fresh copy, without a round trip."""
    api = FakeApi()
    result = _run(worker, """
        def act(api):
            first = api.targets(True)
            first[0][0] = 99
            again = api.targets(True)
            other = api.targets(False)
            api.step()
            after = api.targets(True)
            return [first, again, other, after]
    """, api)
    assert result.returned == [[[99, 2], [3, 4]], [[1, 2], [3, 4]], [1, 2], [[1, 2], [3, 4]]]
    assert api.traces == [True, False, True]  # asked once before the step, once after


def test_print_output_is_captured_and_bounded(worker):
    result = _run(worker, """
        def act(api):
            for i in range(3000):
                print("line", i, "x" * 10)
            return True
    """)
    assert result.returned is True
    assert result.log[0] == "line 0 xxxxxxxxxx"
    assert sum(len(line) for line in result.log) <= sandbox.MAX_LOG_CHARS + 100


def test_moderate_recursion_and_sizes_are_allowed(worker):
    result = _run(worker, """
        def depth(n):
            return 0 if n == 0 else 1 + depth(n - 1)

        def act(api):
            cells = [0] * 4096
            text = "ab" * 1000
            small = text.replace("a", "") == "b" * 1000 and 2 ** 60 - 1 + 1 == 2 ** 60
            return depth(100) == 100 and len(cells) == 4096 and small
    """)
    assert (result.returned, result.error) == (True, None)


def test_memory_growth_is_stopped(worker):
    result = _run(worker, """
        def act(api):
            chunks = []
            for i in range(64):  # 512 MB at most, should the memory checks fail
                chunks.append([i] * 1000000)
            return True
    """, time_limit=10.0)
    assert result.stopped == "memory" and result.lineno in (3, 4) and "memory" in result.error


def test_hashing_deeply_nested_tuples_does_not_crash(worker):
    """CPython 3.11 hashes tuples by unguarded C recursion: 180k levels overflow a default 8 MB stack
    (a segfault that would kill this test process), but not the sandbox thread's."""
    result = _run(worker, """
        def act(api):
            x = ()
            for _ in range(20000):
                x = (((((((((x,),),),),),),),),)
            return len({x: 1})
    """)
    assert (result.returned, result.error) == (1, None)


def test_zip_and_enumerate_do_not_follow_a_growing_list():
    """`a.extend(zip(a))` would loop forever inside C (no line events) if zip read the live list."""
    a = [1, 2]
    zipped, numbered = sandbox._zip(a), sandbox._enumerate(a)
    a.append(3)
    assert list(zipped) == [(1,), (2,)] and list(numbered) == [(0, 1), (1, 2)]


def test_code_called_outside_run_cannot_print():
    fn = sandbox.compile_action("def act(api):\n    print('hi')\n", "act")
    with pytest.raises(RuntimeError, match="sandbox_worker.run"):
        fn(None)


def test_check_reports_compiler_errors_with_their_line():
    for body, message in [("    x = 1\n    continue\n", "'continue' not properly in loop"),
                          ("    return dict(a=1, a=2)\n", "keyword argument repeated"),
                          ("    *a = [1]\n    return a\n", "starred assignment target")]:
        source = "def act(api):\n" + body
        with pytest.raises(SandboxError, match=message) as info:
            sandbox.check(source, "act")
        assert info.value.lineno == source.count("\n") - (1 if "return a\n" in body else 0)


def test_a_code_action_that_does_not_compile_is_a_failed_action_not_an_exception():
    bad = E.CodeAction("bad", "def bad(api):\n    api.noop()\n    continue\n")
    env = E.make_env("collect_wood", 0, code_actions=[bad, E.CHOP_TREE])  # must not raise
    try:
        env.reset(seed=0)
        info = env.step(env.n_base)[4]
        assert info["code_error"].startswith("line 3: SyntaxError") and info["prim_steps"] == 1
        assert not info["code_ok"]
        assert env.step(env.n_base + 1)[4]["code_error"] == ""  # the env and its worker carry on
    finally:
        env.close()


def test_an_env_starts_one_worker_and_closing_it_ends_the_worker():
    env = E.make_env("collect_wood", 0, code_actions=[E.CHOP_TREE], max_macro_steps=5)
    env.reset(seed=0)
    for _ in range(3):
        env.step(env.n_base)
    proc = env.sandbox._proc
    assert env.sandbox.starts == 1 and proc.poll() is None
    env.close()
    assert proc.poll() is not None


LONG_C_CALL = "def act(api):\n    x = list(range(999999))\n    while True:\n        x = sorted(x, key=str)\n"


def test_an_overrun_inside_one_c_call_kills_the_worker_and_the_next_run_gets_a_fresh_one():
    worker = sandbox_host.Worker()
    try:
        start = time.perf_counter()
        result = worker.run(LONG_C_CALL, "act", FakeApi(), time_limit=0.3)
        took = time.perf_counter() - start
        assert result.stopped == "time_budget" and "killed" in result.error
        assert 0.3 + sandbox_host.KILL_AFTER_S <= took < 0.3 + sandbox_host.KILL_AFTER_S + 0.5
        canary = worker.run(CANARY, "act", FakeApi())
        assert (canary.returned, canary.error, worker.starts) == (True, None, 2)
    finally:
        worker.close()


class KillingApi(FakeApi):
    """Api methods that do to the worker what a crash or a Ctrl-C would."""

    def __init__(self, worker: sandbox_host.Worker):
        super().__init__()
        self.worker = worker

    def crash(self) -> bool:
        os.kill(self.worker._proc.pid, signal.SIGKILL)
        self.worker._proc.wait()
        return True

    def crash_soon(self) -> bool:
        threading.Timer(0.2, os.kill, (self.worker._proc.pid, signal.SIGKILL)).start()
        return True

    def interrupt_worker(self) -> bool:
        os.kill(self.worker._proc.pid, signal.SIGINT)
        time.sleep(0.05)
        return True

    def ctrl_c(self) -> None:
        raise KeyboardInterrupt


def test_a_crashed_worker_fails_only_its_own_run():
    worker = sandbox_host.Worker()
    try:
        result = worker.run("def act(api):\n    api.crash()\n    return True\n", "act", KillingApi(worker))
        assert result.stopped == "crashed" and "SIGKILL" in result.error
        canary = worker.run(CANARY, "act", FakeApi())
        assert (canary.returned, canary.error, worker.starts) == (True, None, 2)
        busy = "def act(api):\n    api.crash_soon()\n" + LONG_C_CALL.split("\n", 1)[1]
        result = worker.run(busy, "act", KillingApi(worker), time_limit=5.0)  # dies while the code runs
        assert result.stopped == "crashed" and "SIGKILL" in result.error and worker.starts == 2
        canary = worker.run(CANARY, "act", FakeApi())
        assert (canary.returned, canary.error, worker.starts) == (True, None, 3)
        os.kill(worker._proc.pid, signal.SIGKILL)  # dies between runs: the next run is not blamed
        worker._proc.wait()
        canary = worker.run(CANARY, "act", FakeApi())
        assert (canary.returned, canary.error, worker.starts) == (True, None, 4)
    finally:
        worker.close()


def test_ctrl_c_reaches_the_trainer_only_and_kills_the_worker():
    worker = sandbox_host.Worker()
    try:
        api = KillingApi(worker)
        result = worker.run("def act(api):\n    api.interrupt_worker()\n    return True\n", "act", api)
        assert (result.returned, result.error) == (True, None)  # the worker ignored SIGINT
        proc = worker._proc
        with pytest.raises(KeyboardInterrupt):
            worker.run("def act(api):\n    api.ctrl_c()\n", "act", api)
        assert proc.poll() is not None
    finally:
        worker.close()


def test_api_arguments_are_bounded_before_the_trainer_sees_them(worker):
    api = FakeApi()
    api.targets = lambda *args: api.traces.append(args)  # records any call that gets through
    result = _run(worker, "def act(api):\n    return api.targets('x' * 1000000)\n", api)
    assert result.error.startswith("line 2: ValueError: api.targets() arguments are too large")
    assert api.traces == []


def test_memory_kept_alive_by_a_stopped_call_is_freed(worker):
    """A cycle (list -> itself, exception -> traceback -> frame -> list) holding 40 MB. Were it kept
    after each run, the worker would have to be replaced (it is, once it holds too much) or the next
    run would start 40 MB closer to the memory ceiling."""
    source = "def act(api):\n    x = [[0] * 999999 for _ in range(5)]\n    x.append(x)\n    raise ValueError(x)\n"
    _run(worker, CANARY)
    starts = worker.starts
    outcomes = {_run(worker, source, time_limit=5.0).error.splitlines()[0] for _ in range(5)}
    assert outcomes == {"line 4: ValueError: ..."} and worker.starts == starts


def test_the_trainer_acts_only_on_well_formed_messages_from_the_worker():
    """Code that escaped in the worker could write anything on the socket: the trainer decodes JSON
    only, calls public api methods only, and takes a result only in the expected shape."""
    names = {"step"}
    assert sandbox_host._is_call(["call", "step", [1], {"times": 2}], names)
    for bad in (["call", "_act", [], {}], ["call", "secret", [], {}], ["call", "step", {}, {}],
                ["call", "step", [], {"_budget": 1}], ["call", "step", []], {"call": "step"}):
        assert not sandbox_host._is_call(bad, names), bad
    assert sandbox_host._is_done(["done", True, None, None, None, ["log"], False])
    for bad in (["done", True, 5, None, None, [], False], ["done", True, None, None, "pwned", [], False],
                ["done", True, None, None, None, [1], False], ["done", True, None, None, None, [], 0]):
        assert not sandbox_host._is_done(bad), bad


def test_a_fresh_workers_start_up_is_not_charged_to_the_first_run(monkeypatch):
    """A fresh interpreter takes ~0.1-0.3 s to import; a short time budget with no grace must still let a
    trivial first run finish, or every dry run on a busy machine could fail as 'ran past its budget'."""
    monkeypatch.setattr(sandbox_host, "KILL_AFTER_S", 0.0)
    w = sandbox_host.Worker()
    try:
        result = _run(w, "def act(api):\n    return True\n", time_limit=0.05)
        assert result.returned is True and result.stopped is None, result
    finally:
        w.close()


def test_a_worker_whose_trainer_dies_leaves_quietly():
    """A trainer killed (timeout, OOM) before reading the worker's "ready" resets the socket: the
    worker must exit 0 without a traceback on the user's terminal."""
    ours, theirs = socket.socketpair()
    proc = subprocess.Popen([sys.executable, "-E", "-s", sandbox_host._WORKER, str(theirs.fileno()),
                             str(os.getpid())], pass_fds=[theirs.fileno()], stderr=subprocess.PIPE)
    theirs.close()
    select.select([ours], [], [], 30)  # its "ready" has arrived: closing now, unread, resets the socket
    ours.close()
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0 and err == b"", err.decode()


def test_the_worker_gets_none_of_the_trainers_environment(monkeypatch):
    """Model code that escaped the checks would find no key in its environment to steal."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-must-not-leak")
    w = sandbox_host.Worker()
    try:
        assert _run(w, "def act(api):\n    return True\n").returned is True
        with open(f"/proc/{w._proc.pid}/environ", "rb") as f:
            environ = f.read()
    finally:
        w.close()
    assert b"sk-must-not-leak" not in environ and b"OPENAI_API_KEY" not in environ
    assert environ.split(b"\0")[0] == b"MALLOC_ARENA_MAX=1"


# A trainer process: it starts a worker, says its pid, then runs code stuck in one C call for minutes
# (2**16 tuples of one hash in a set), under a time limit given on the command line.
TRAINER = f"""
import sys
sys.path.insert(0, {str(sandbox_host._WORKER.rsplit("/", 1)[0])!r})
import sandbox_host
from tests.adversarial_corpus import CORPUS
worker = sandbox_host.Worker()
worker.run("def act(api):\\n    return True\\n", "act", None)
print(worker._proc.pid, flush=True)
stuck = next(case.source for case in CORPUS if case.name == "colliding_tuple_set")
worker.run(stuck, "act", None, time_limit=float(sys.argv[1]))
"""


def _stat(pid: int) -> tuple[bool, float]:
    """(exited, CPU seconds used): exited is no such process, or a zombie nobody has reaped yet."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return True, 0.0
    return fields[0] == "Z", (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _gone(pid: int) -> bool:
    return _stat(pid)[0]


def _orphan_test(time_limit: float, stop: signal.Signals, within: float) -> float:
    """Start TRAINER, let its worker enter the C call, send the trainer `stop`, and require the worker
    gone within `within` seconds; the CPU time it used, as last seen."""
    trainer = subprocess.Popen([sys.executable, "-c", TRAINER, str(time_limit)], stdout=subprocess.PIPE,
                               cwd=os.path.dirname(sandbox_host._WORKER))
    pid = None
    try:
        pid = int(trainer.stdout.readline())
        time.sleep(1.0)  # building the keys takes ~0.1 s: then the set's C call runs
        assert not _gone(pid)
        os.kill(trainer.pid, stop)
        deadline, used = time.perf_counter() + within, 0.0
        while time.perf_counter() < deadline:
            gone, cpu = _stat(pid)
            if gone:
                break
            used = max(used, cpu)
            time.sleep(0.05)
        assert _gone(pid), f"the worker outlived its trainer by {within} s"
        return used
    finally:
        trainer.kill()
        trainer.wait()
        if pid is not None and not _gone(pid):
            os.kill(pid, signal.SIGKILL)  # the failed test must not leave a core burning


def test_a_worker_inside_one_c_call_dies_with_its_killed_trainer():
    """SIGKILL (the OOM killer, preemption): nothing in the trainer runs, and the worker's own Python
    cannot run while the C call holds the interpreter. The parent-death signal ends it."""
    _orphan_test(time_limit=60.0, stop=signal.SIGKILL, within=5.0)


def test_a_worker_started_by_a_thread_that_ends_lives_on():
    """The parent-death signal follows the thread that started the worker: one started for a thread
    pool's task must not die when that thread ends."""
    w = sandbox_host.Worker()
    try:
        thread = threading.Thread(target=_run, args=(w, CANARY))
        thread.start()
        thread.join()
        time.sleep(0.2)
        canary = _run(w, CANARY)
        assert (canary.returned, canary.error, w.starts) == (True, None, 1)
    finally:
        w.close()


def test_a_worker_inside_one_c_call_is_bounded_by_cpu_time_when_its_trainer_cannot_kill_it():
    """A stopped trainer (SIGSTOP, a debugger) never kills: the per-run CPU limit (time limit + kill
    grace + 1 s, rounded up) ends the worker. CPU time: on a busy machine that is more wall time."""
    used = _orphan_test(time_limit=2.0, stop=signal.SIGSTOP, within=15.0)
    assert used <= 2.0 + sandbox_host.KILL_AFTER_S + 1.0 + 1.0

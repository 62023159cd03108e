"""Tests for the sandbox worker's life (sandbox/host.py, sandbox/worker.py): one per env, killed and
replaced when a C call overruns or it crashes, Ctrl-C left to the trainer, its start-up off the run's
clock, and never outliving its trainer (killed, stopped, or a thread that started it ending) nor
seeing the trainer's environment; the api boundary (plain data both ways, arguments bounded, replies in
the protocol's shape only). The code-level guarantees are in tests/test_sandbox.py and
tests/test_sandbox_budgets.py.

    python -m pytest -q tests/test_sandbox_worker.py
"""

import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

import sandbox.worker
from env import CHOP_TREE, CodeAction, make_env
from sandbox import host
from tests.sandbox_helpers import CANARY, FakeApi, _run, hang_guard  # noqa: F401 - hang_guard: autouse here too


@pytest.fixture(scope="module")
def shared():
    """One worker for the tests that need no fresh one."""
    w = host.Worker()
    yield w
    w.close()


def test_an_env_starts_one_worker_and_closing_it_ends_the_worker():
    env = make_env("collect_wood", 0, code_actions=[CHOP_TREE], max_macro_steps=5)
    env.reset(seed=0)
    for _ in range(3):
        env.step(env.n_base)
    proc = env.sandbox._proc
    assert env.sandbox.starts == 1 and proc.poll() is None
    env.close()
    assert proc.poll() is not None


LONG_C_CALL = "def act(api):\n    x = list(range(999999))\n    while True:\n        x = sorted(x, key=str)\n"


def test_an_overrun_inside_one_c_call_kills_the_worker_and_the_next_run_gets_a_fresh_one():
    worker = host.Worker()
    try:
        start = time.perf_counter()
        result = worker.run(LONG_C_CALL, "act", FakeApi(), time_limit=0.3)
        took = time.perf_counter() - start
        assert result.stopped == "time_budget" and "killed" in result.error
        assert 0.3 + host.KILL_AFTER_S <= took < 0.3 + host.KILL_AFTER_S + 0.5
        canary = worker.run(CANARY, "act", FakeApi())
        assert (canary.returned, canary.error, worker.starts) == (True, None, 2)
    finally:
        worker.close()


def test_jobs_served_together_each_get_their_own_result_and_an_overrun_kills_only_its_worker():
    """Several workers' code at once (env.CodeActionVectorEnv's way): each job's calls reach its own
    api, and one that hangs inside a C call is killed on its own clock while the others finish."""
    workers = [host.Worker() for _ in range(3)]
    try:
        apis = [FakeApi(budget=3 + i) for i in range(3)]
        sources = [CANARY.replace("< 3", f"< {3 + i}").replace("n == 2", f"n == {2 + i}") for i in range(2)]
        jobs = [w.start(src, "act", api, time_limit=0.3)
                for w, src, api in zip(workers[:2], sources, apis[:2], strict=True)]
        jobs.append(workers[2].start(LONG_C_CALL, "act", apis[2], time_limit=0.3))
        start = time.perf_counter()
        host.serve(jobs)
        took = time.perf_counter() - start
        assert [(j.result.returned, j.result.error) for j in jobs[:2]] == [(True, None), (True, None)]
        assert [a._steps for a in apis[:2]] == [3, 4]
        assert jobs[2].result.stopped == "time_budget" and "killed" in jobs[2].result.error
        assert 0.3 + host.KILL_AFTER_S <= took < 0.3 + host.KILL_AFTER_S + 0.5
        assert [w.starts for w in workers] == [1, 1, 1] and workers[2]._proc is None
    finally:
        for w in workers:
            w.close()


def test_a_jobs_clock_skips_the_time_the_trainer_spends_on_the_other_jobs():
    """One job's env steps take 1.2 s of the trainer's time in all; another job's 30 calls each wait
    for one of them. The waiting job is not charged that time, so its 0.3 s budget holds."""
    workers = [host.Worker() for _ in range(2)]
    try:
        slow = workers[0].start("def act(api):\n    for _ in range(12):\n        api.slow()\n    return True\n",
                                "act", FakeApi(budget=99, sleep=0.1), time_limit=0.3)
        quick = workers[1].start("def act(api):\n    for i in range(30):\n        api.query(i)\n    return True\n",
                                 "act", FakeApi(), time_limit=0.3)
        start = time.perf_counter()
        host.serve([slow, quick])
        assert time.perf_counter() - start > 1.2
        assert [(j.result.returned, j.result.error) for j in (slow, quick)] == [(True, None), (True, None)]
    finally:
        for w in workers:
            w.close()


class KillingApi(FakeApi):
    """Api methods that do to the worker what a crash or a Ctrl-C would."""

    def __init__(self, worker: host.Worker):
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
    worker = host.Worker()
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
    worker = host.Worker()
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


def test_a_fresh_workers_start_up_is_not_charged_to_the_first_run(monkeypatch):
    """A fresh interpreter takes ~0.1-0.3 s to import; a short time budget with no grace must still let a
    trivial first run finish, or every dry run on a busy machine could fail as 'ran past its budget'."""
    monkeypatch.setattr(host, "KILL_AFTER_S", 0.0)
    w = host.Worker()
    try:
        result = _run(w, "def act(api):\n    return True\n", time_limit=0.05)
        assert result.returned is True and result.stopped is None, result
    finally:
        w.close()


def test_a_worker_whose_trainer_dies_leaves_quietly():
    """A trainer killed (timeout, OOM) before reading the worker's "ready" resets the socket: the
    worker must exit 0 without a traceback on the user's terminal."""
    ours, theirs = socket.socketpair()
    proc = subprocess.Popen([sys.executable, "-E", "-s", "-m", "sandbox.worker", str(theirs.fileno()),
                             str(os.getpid())], pass_fds=[theirs.fileno()], stderr=subprocess.PIPE, cwd=host._ROOT)
    theirs.close()
    select.select([ours], [], [], 30)  # its "ready" has arrived: closing now, unread, resets the socket
    ours.close()
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0 and err == b"", err.decode()


def test_the_worker_gets_none_of_the_trainers_environment(monkeypatch):
    """Model code that escaped the checks would find no key in its environment to steal."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-must-not-leak")
    w = host.Worker()
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
sys.path.insert(0, {host._ROOT!r})
from sandbox import host
from tests.adversarial_corpus import CORPUS
worker = host.Worker()
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
                               cwd=host._ROOT)
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
    w = host.Worker()
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
    assert used <= 2.0 + host.KILL_AFTER_S + 1.0 + 1.0


def test_a_worker_its_cpu_limit_ends_while_the_trainer_is_busy_elsewhere_ran_past_its_time_budget():
    """The job's clock does not run while the trainer steps other envs, so a long C call can reach the
    worker's own CPU limit first: that is the time budget, not a crash."""
    worker = host.Worker()
    try:
        src = "def act(api):\n    a = 'a' * 999999\n    b = 'a' * 999999\n    return max([a, b] * 499999)\n"
        job = worker.start(src, "act", FakeApi(), time_limit=0.05)
        proc, start = worker._proc, time.perf_counter()
        while proc.poll() is None and time.perf_counter() - start < 15:  # busy elsewhere: not in serve
            time.sleep(0.05)
        assert proc.returncode == -signal.SIGXCPU
        host.serve([job])
        assert job.result.stopped == "time_budget" and "CPU-time limit" in job.result.error
        canary = worker.run(CANARY, "act", FakeApi())
        assert (canary.returned, canary.error, worker.starts) == (True, None, 2)
    finally:
        worker.close()


def test_a_code_action_that_does_not_compile_is_a_failed_action_not_an_exception():
    bad = CodeAction("bad", "def bad(api):\n    api.noop()\n    continue\n")
    env = make_env("collect_wood", 0, code_actions=[bad, CHOP_TREE])  # must not raise
    try:
        env.reset(seed=0)
        info = env.step(env.n_base)[4]
        assert info["code_error"].startswith("line 3: SyntaxError") and info["prim_steps"] == 1
        assert not info["code_ok"]
        assert env.step(env.n_base + 1)[4]["code_error"] == ""  # the env and its worker carry on
    finally:
        env.close()


def test_memory_kept_alive_by_a_stopped_call_is_freed():
    """A cycle (list -> itself, exception -> traceback -> frame -> list) holding 40 MB. Were it kept
    after each run, the worker would have to be replaced (it is, once it holds too much) or the next
    run would start 40 MB closer to the memory ceiling."""
    source = "def act(api):\n    x = [[0] * 999999 for _ in range(5)]\n    x.append(x)\n    raise ValueError(x)\n"
    w = host.Worker()
    try:
        _run(w, CANARY)
        outcomes = {_run(w, source, time_limit=5.0).error.splitlines()[0] for _ in range(5)}
        assert outcomes == {"line 4: ValueError: ..."} and w.starts == 1
    finally:
        w.close()


def test_the_trainer_acts_only_on_well_formed_messages_from_the_worker():
    """Code that escaped in the worker could write anything on the socket: the trainer decodes JSON
    only, calls public api methods only, and takes a result only in the expected shape."""
    names = {"step"}
    assert host._is_call(["call", "step", [1], {"times": 2}], names)
    for bad in (["call", "_act", [], {}], ["call", "secret", [], {}], ["call", "step", {}, {}],
                ["call", "step", [], {"_budget": 1}], ["call", "step", []], {"call": "step"}):
        assert not host._is_call(bad, names), bad
    assert host._is_done(["done", True, None, None, None, ["log"], False])
    for bad in (["done", True, 5, None, None, [], False], ["done", True, None, None, "pwned", [], False],
                ["done", True, None, None, None, [1], False], ["done", True, None, None, None, [], 0]):
        assert not host._is_done(bad), bad


def test_api_proxy_is_read_only_and_plain(shared):
    result = _run(shared, """
        def act(api):
            return [api.grid(), api.step()]
    """)
    assert result.returned == [[[0, 1, 2], [3, 4, 5]], 1]
    assert type(result.returned[0][0][0]) is int
    api = FakeApi()
    result = _run(shared, """
        def act(api):
            nested, flat = api.targets(True), api.targets(nested=False)
            nested[0][0] = 99
            flat.append(3)
            return [nested, flat]
    """, api)
    assert result.returned == [[[99, 2], [3, 4]], [1, 2, 3]]
    assert api.targets(True) == [[1, 2], [3, 4]] and api.targets(False) == [1, 2]
    proxy = sandbox.worker._ApiProxy(("step",), None)
    with pytest.raises(AttributeError):
        proxy.step = None
    with pytest.raises(AttributeError):
        del proxy.step
    with pytest.raises(AttributeError):
        proxy._budget  # noqa: B018 - the access itself is the test


def test_api_arguments_are_bounded_before_the_trainer_sees_them(shared):
    api = FakeApi()
    api.targets = lambda *args: api.traces.append(args)  # records any call that gets through
    result = _run(shared, "def act(api):\n    return api.targets('x' * 1000000)\n", api)
    assert result.error.startswith("line 2: ValueError: api.targets() arguments are too large")
    assert api.traces == []

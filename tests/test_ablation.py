"""bench/ablation.py and grid.py on fake run directories and fake result files: results, resuming,
staleness (per mode and per task), the slow-loop grid. The results page itself: tests/test_results_table.py,
which shares the fakes below."""

import json
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import env
from bench import ablation, grid

REPO = Path(__file__).resolve().parents[1]
POPEN = subprocess.Popen  # FakeTrain lets git and nvidia-smi through


def fake_run(run_dir: Path, cell: grid.Cell, lengths: list[int], unlocked: list[dict], *, finished: bool = True,
             evals: tuple = (0.25, 0.75), attempts: tuple = (("abc", False, 10.0),),
             ended_in: list[int] | None = None) -> Path:
    """A run directory as train.py (and ablation.attempt) leave it: config, metrics, stats rows (each with the
    iteration it ended in, given `ended_in`), summary."""
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.json").write_text(json.dumps(
        {"args": {"task": cell.task, "mode": cell.mode, "seed": cell.seed, "total_steps": cell.budget,
                  "eval_episodes": 8}, "backend": "reference", "device": "cpu"}))
    last = sum(lengths)
    rows = [{"global_step": last // 2, "charts/success_rate": 0.5}]
    rows += [{"global_step": last, "eval/success_rate": e} for e in evals]
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    stats = [dict({"length": n, "reward": 0.0}, **{f"achievement_{a}": v for a, v in ach.items()})
             for n, ach in zip(lengths, unlocked, strict=True)]
    for row, k in zip(stats, ended_in or [], strict=False):
        row["iteration"] = k
    (run_dir / "stats.jsonl").write_text("".join(json.dumps(r) + "\n" for r in stats))
    (run_dir / "attempts.jsonl").write_text("".join(json.dumps(
        {"commit": c, "dirty": d, "machine": {"cpu": "fake cpu", "cores": 2, "gpu": None}, "wall_s": w, "rc": 0})
        + "\n" for c, d, w in attempts))
    if finished:
        (run_dir / "summary.md").write_text("# done\n")
    return run_dir


def fake_result(results: Path, cell: grid.Cell, success: float | None, n: int, *, version: int | None = None,
                commit: str = "abc", crafter: dict | None = None) -> dict:
    """A result file as result_of writes it (only the fields the table reads are meaningful); by default
    at its mode's current version."""
    measure = "achievements" if cell.task == "crafter" else "success"  # what crafter's curve points hold
    r = {"results_version": grid.results_version(cell.mode, cell.task) if version is None else version,
         "task": cell.task, "mode": cell.mode, "seed": cell.seed, "budget": cell.budget,
         "commit": commit, "dirty": False, "machine": {"cpu": "fake cpu", "cores": 2, "gpu": None},
         "curve": [{"step": cell.budget * k // ablation.POINTS, "n": n, measure: success}
                   for k in range(1, ablation.POINTS + 1)],
         "train": {"n": n, "success": success}, "eval": {"n": 8, "success": success}}
    if crafter is not None:
        r["crafter"] = crafter
    ablation.write_json(results / f"{cell.name}.json", r)
    return r


def row_of(text: str, *cells: str) -> list[list[str]]:
    """The cells of every table row holding all of `cells`."""
    rows = [line for line in text.splitlines() if all(f"| {c} |" in line for c in cells)]
    assert rows, cells
    return [[c.strip() for c in line.strip("|").split("|")] for line in rows]


def test_grid_is_the_issues_cells_cheap_tasks_first():
    cells = grid.grid()
    assert len(cells) == 4 * 4 * 3 + 3 * 3 and len(set(cells)) == len(cells)  # crafter: rl, code, rlgpt x 3
    crafter = [c for c in cells if c.task == "crafter"]
    assert [c.task for c in cells[:12]] == ["collect_wood"] * 12 and cells[-len(crafter):] == crafter
    assert [(c.mode, c.seed) for c in crafter] == [(m, s) for s in (1, 2, 3) for m in ("rl", "code", "rlgpt")]
    slow = grid.slowloop_grid()  # each pair beside the code arm of its seed, crafter's at 1M too
    assert [(c.task, c.mode, c.seed) for c in slow[:3]] == [("make_stone_pickaxe", m, 1)
                                                           for m in ("rlgpt", "rlgpt-1iter", "code")]
    assert {(c.task, c.budget) for c in slow} == {("make_stone_pickaxe", 300_000), ("collect_iron", 300_000),
                                                  ("crafter", 1_000_000)} and len(slow) == 3 * 3 * 3
    assert {c.mode for c in cells} == {"rl", "rl+config", "code", "rlgpt"}
    assert grid.Cell("place_table", "rl+config", 2, 100_000).name == "place_table__rl+config__s2__100000"
    assert all(c.seed == 1 and c.budget == grid.QUICK_BUDGETS[c.task] for c in grid.grid(quick=True))


def test_result_curve_counts_the_episodes_that_finished_in_each_window(tmp_path):
    cell = grid.Cell("collect_wood", "rlgpt", 1, 1000)
    # positions (cumulative lengths): 50, 100, 200, 500, 1000 and 1200, past the budget
    lengths, wood = [50, 50, 100, 300, 500, 200], [1, 0, 2, 0, 1, 1]
    d = fake_run(tmp_path / "run", cell, lengths, [{"collect_wood": w, "place_table": 1} for w in wood],
                 attempts=(("abc", False, 30.0), ("def", True, 20.0)))
    (d / "iter_1").mkdir()
    (d / "iter_1" / "stats.json").write_text(json.dumps({
        "iteration": 1, "env_steps": 500, "success_rate": 0.4, "success_episodes": 5, "code_actions": {
            "chop_tree": {"chosen": 40, "share": 0.1, "success_rate": 0.25, "errors": [["no tree in view", 30]]}}}))
    (d / "iter_1" / "feedback.json").write_text(json.dumps({"summary": "chop_tree is called blind",
                                                            "reasons": ["chop_tree: try variant search"]}))
    (d / "iter_2").mkdir()  # the next iteration, and the log line that says whether it kept the change
    (d / "iter_2" / "stats.json").write_text(json.dumps({"iteration": 2, "env_steps": 1000, "success_rate": 0.2,
                                                         "success_episodes": 30, "code_actions": {}}))
    with open(d / "train.log", "a") as f:
        f.write("[iter 2] env steps 1000\n[iter 2] the critic's change: rolled back: success 0.2: worse\n")
    r = ablation.result_of(cell, d)
    assert [(p["step"], p["n"], p["success"]) for p in r["curve"]] == [
        (100, 2, 0.5), (200, 1, 1.0), (300, 0, None), (400, 0, None), (500, 1, 0.0),
        (600, 0, None), (700, 0, None), (800, 0, None), (900, 0, None), (1000, 1, 1.0)]
    assert r["train"] == {"window": [900, 1000], "n": 1, "success": 1.0}
    assert r["eval"] == {"success": 0.75, "n": 8}  # the last evaluation, with the run's eval episode count
    assert (r["env_steps"], r["wall_s"], r["sps"]) == (1200, 50.0, 24.0)
    assert r["finished"] == {"episodes": 6, "env_steps": 1200}
    assert (r["commit"], r["resumed_at_commits"], r["dirty"], r["attempts"]) == ("abc", ["def"], True, 2)
    assert r["results_version"] == grid.results_version("rlgpt", "collect_wood") and r["machine"]["cpu"] == "fake cpu"
    none = {"mean": None, "n": 0}  # these stats rows name no iteration (rows from before they did)
    assert r["iterations"] == [
        {"iteration": 1, "env_steps": 500, "train": {"success": 0.4, "n": 5}, "episode_length": none, "change": None,
         "critic": "chop_tree is called blind", "decided": ["chop_tree: try variant search"],
         "code_actions": {"chop_tree": {"chosen": 40, "success_rate": 0.25, "error": "no tree in view"}}},
        {"iteration": 2, "env_steps": 1000, "train": {"success": 0.2, "n": 30}, "episode_length": none,
         "change": "rolled back: success 0.2: worse", "critic": None, "decided": [], "code_actions": {}}]
    ablation.write_json(tmp_path / "r.json", r)
    assert (tmp_path / "r.json").stat().st_size < 4000 and not list(tmp_path.glob(".*tmp*"))


def test_each_iteration_keeps_the_mean_length_and_count_of_the_episodes_that_ended_in_it(tmp_path):
    """From stats.jsonl's rows, one per finished training episode naming the iteration it ended in, not from
    iter_k/stats.json's rounded summary; an iteration in which no episode ended has no mean."""
    cell = grid.Cell("crafter", "rlgpt", 1, 3000)
    d = fake_run(tmp_path / "run", cell, [100, 201, 300, 2000], [{}] * 4, ended_in=[1, 1, 3, 3])
    for k in (1, 2, 3):
        (d / f"iter_{k}").mkdir()
        (d / f"iter_{k}" / "stats.json").write_text(json.dumps(
            {"iteration": k, "env_steps": 1000 * k, "episode_lengths": {"episodes": 9, "mean_length": 1.0}}))
    assert [it["episode_length"] for it in ablation.result_of(cell, d)["iterations"]] == [
        {"mean": 150.5, "n": 2}, {"mean": None, "n": 0}, {"mean": 1150.0, "n": 2}]
    # no single goal: each iteration keeps its Crafter score (iter_k/stats.json's, without the achievements)
    score = {"score": 41.2, "se": 0.9, "episodes": 2, "achievements": {"collect_wood": 1.0}}
    (d / "iter_1" / "stats.json").write_text(json.dumps({"iteration": 1, "env_steps": 1000, "score": score}))
    its = ablation.result_of(cell, d)["iterations"]
    assert its[0]["score"] == {"score": 41.2, "se": 0.9, "episodes": 2} and "score" not in its[1]


def test_a_rows_own_success_field_wins_over_the_achievement():
    wood = env.get_task("collect_wood")
    assert env.row_success(wood, {"success": False, "achievement_collect_wood": 1}) is False
    assert env.row_success(wood, {"achievement_collect_wood": 1}) is True
    assert env.row_success(wood, {"achievement_collect_wood": 0, "achievement_place_table": 1}) is False


def test_crafter_result_has_the_score_and_rates_within_the_budget(tmp_path):
    cell = grid.Cell("crafter", "rl", 1, 3000)
    unlocked = [{"collect_wood": 1, "collect_diamond": 0}, {"collect_wood": 0}, {"collect_wood": 2, "place_table": 1},
                {"collect_wood": 1, "collect_diamond": 1}]  # the 4th ends at 4000 env steps, past the budget
    d = fake_run(tmp_path / "run", cell, [1000] * 4, unlocked)
    r = ablation.result_of(cell, d)
    # Crafter's score of the 3 episodes within the budget: wood in 2 (66.7%), a table in 1 (33.3%), the other 20
    # achievements never: exp((ln(1 + 66.7) + ln(1 + 33.3)) / 22) - 1 = 0.42 (all 4 episodes would give 0.64)
    assert r["crafter"]["score"] == 0.42 and r["crafter"]["episodes"] == 3
    assert r["crafter"]["achievements"]["collect_wood"] == round(200 / 3, 2)
    assert r["crafter"]["achievements"]["collect_diamond"] == 0.0 and len(r["crafter"]["achievements"]) == 22
    assert [p["achievements"] for p in r["curve"] if p["n"]] == [1, 0, 2]


class FakeTrain:
    """Stands in for subprocess.Popen: records the train.py command and leaves a finished run directory."""

    def __init__(self, calls: list, finish: bool = True, rc: int = 0):
        self.calls, self.finish, self.rc = calls, finish, rc

    def __call__(self, cmd, **kw):
        if cmd[0] != sys.executable:
            return POPEN(cmd, **kw)
        self.calls.append(cmd)
        if "--resume" in cmd:
            run_dir = Path(cmd[cmd.index("--resume") + 1])
        else:
            run_dir = Path(cmd[cmd.index("--runs-dir") + 1]) / cmd[cmd.index("--run-name") + 1]
        cell = next(c for quick in (False, True) for c in grid.grid(quick) + grid.slowloop_grid(quick)
                    if c.name == run_dir.name)
        fake_run(run_dir, cell, [cell.budget // 2] * 2, [{"collect_wood": 1}] * 2, finished=self.finish, attempts=())
        return self

    def wait(self) -> int:
        return self.rc


class Concurrent(FakeTrain):
    """FakeTrain whose processes each wait until `n` of them run at once (a serial runner times out)."""

    def __init__(self, calls: list, n: int):
        super().__init__(calls)
        self.barrier = threading.Barrier(n, timeout=20)

    def wait(self) -> int:
        self.barrier.wait()
        return 0


def test_only_cells_without_a_current_result_run_and_each_result_is_written_at_once(tmp_path, monkeypatch):
    done, stale, new = (grid.Cell("collect_wood", m, 1, 50_000) for m in ("rl", "code", "rlgpt"))
    results = tmp_path / "results"
    fake_result(results, done, 0.9, 10)
    fake_result(results, stale, 0.1, 10, version=grid.RESULTS_VERSION["code"] - 1)
    calls = []
    monkeypatch.setattr(ablation.subprocess, "Popen", FakeTrain(calls))
    ablation.execute([done, stale, new], tmp_path / "out", results, ["--num-envs", "4"])
    assert [c[c.index("--mode") + 1] for c in calls] == ["code", "rlgpt"]  # the stale one runs again
    assert all(c[c.index("--llm") + 1] == "reference" and c[-2:] == ["--num-envs", "4"] for c in calls)
    assert calls[0][calls[0].index("--total-steps") + 1] == "50000"
    for cell in (stale, new):
        r = json.loads((results / f"{cell.name}.json").read_text())
        assert r["results_version"] == grid.results_version(cell.mode, cell.task) and r["train"]["success"] == 1.0
        run_dir = tmp_path / "out" / f"v{grid.results_version(cell.mode, cell.task)}" / cell.name
        attempt = json.loads((run_dir / "attempts.jsonl").read_text())
        assert attempt["rc"] == 0 and attempt["machine"]["cores"] >= 1 and "commit" in attempt
    assert json.loads((results / f"{done.name}.json").read_text())["train"]["success"] == 0.9  # untouched


def test_unfinished_run_resumes_a_finished_one_only_gets_its_result_a_failed_one_none(tmp_path, monkeypatch):
    partial, finished, failing = grid.grid()[:3]
    out, results = tmp_path / "out", tmp_path / "results"
    for cell, ach, done in ((partial, {}, False), (finished, {"collect_wood": 1}, True)):
        fake_run(out / f"v{grid.results_version(cell.mode, cell.task)}" / cell.name, cell, [100], [ach], finished=done)
    assert "--llm" not in ablation.command_for(partial, out / "x", [])  # plain PPO (rl) needs no backend
    calls = []
    monkeypatch.setattr(ablation.subprocess, "Popen", FakeTrain(calls))
    ablation.execute([partial, finished], out, results, [])
    assert len(calls) == 1 and calls[0][-2:] == ["--resume", str(out / f"v{grid.RESULTS_VERSION['rl']}" / partial.name)]
    assert (results / f"{partial.name}.json").is_file() and (results / f"{finished.name}.json").is_file()
    monkeypatch.setattr(ablation.subprocess, "Popen", FakeTrain(calls, finish=False))  # exits 0 without summary.md
    ablation.execute([failing], out, results, [])
    assert not (results / f"{failing.name}.json").exists()


def test_jobs_run_cells_at_once_a_locked_cell_is_skipped_a_dead_lock_taken_over(tmp_path, monkeypatch):
    cells, out, results = grid.grid()[:4], tmp_path / "out", tmp_path / "results"
    calls = []
    monkeypatch.setattr(ablation.subprocess, "Popen", Concurrent(calls, 2))
    ablation.execute(cells[:2], out, results, [], jobs=2)  # each fake run waits for the other: only --jobs 2 finishes
    assert len(calls) == 2 and all((results / f"{c.name}.json").is_file() for c in cells[:2])
    assert not list(out.rglob(ablation.LOCK))  # released
    live = POPEN([sys.executable, "-c", "import time; time.sleep(60)"])
    dead = POPEN([sys.executable, "-c", "pass"])
    dead.wait()
    try:
        for cell, pid in ((cells[2], live.pid), (cells[3], dead.pid)):
            run_dir = out / f"v{grid.results_version(cell.mode, cell.task)}" / cell.name
            run_dir.mkdir(parents=True)
            (run_dir / ablation.LOCK).write_text(f"{pid} {socket.gethostname()}")
        calls.clear()
        monkeypatch.setattr(ablation.subprocess, "Popen", FakeTrain(calls))
        ablation.execute(cells[2:], out, results, [], jobs=2)
    finally:
        live.kill()
    assert [c[c.index("--mode") + 1] for c in calls] == [cells[3].mode]  # the live holder's cell did not run
    assert not (results / f"{cells[2].name}.json").exists() and (results / f"{cells[3].name}.json").is_file()


def test_an_interrupted_cell_stops_the_command_and_starts_no_other(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(ablation.subprocess, "Popen", FakeTrain(calls, finish=False, rc=130))
    with pytest.raises(SystemExit, match="the same command continues"):
        ablation.execute(grid.grid()[:3], tmp_path / "out", tmp_path / "results", [])
    assert len(calls) == 1 and not (tmp_path / "results").exists()


OLD_RESULTS = "# Results\n\nbefore\n\n<!-- results:start -->\nSTALE-SECTION\n<!-- results:end -->\n\nafter\n"
OLD_README = "# rlgpt\n\nintro\n\n<!-- headline:start -->\nSTALE-SECTION\n<!-- headline:end -->\n\nmore\n"


def pages(root: Path, text: str = OLD_RESULTS, readme: str = OLD_README) -> Path:
    """The two pages --table writes, as the repository has them: docs/results.md (returned) and README.md."""
    (root / "docs").mkdir(parents=True, exist_ok=True)
    (root / "docs" / "results.md").write_text(text)
    (root / "README.md").write_text(readme)
    return root / "docs" / "results.md"


def test_quick_results_never_enter_bench_results(tmp_path, monkeypatch):
    monkeypatch.setattr(ablation, "ROOT", tmp_path)
    calls = []
    monkeypatch.setattr(ablation.subprocess, "Popen", FakeTrain(calls))
    assert ablation.main(["--quick", "--tasks", "collect_wood", "--modes", "rl", "code"]) == 0
    assert all("--iterations" in c for c in calls) and len(calls) == 2
    quick = tmp_path / "bench" / "out" / "ablation-quick"
    assert sorted(p.name for p in (quick / "results").iterdir()) == [
        f"collect_wood__{m}__s1__{grid.QUICK_BUDGETS['collect_wood']}.json" for m in ("code", "rl")]
    assert not (tmp_path / "bench" / "results").exists() and not (tmp_path / "README.md").exists()
    assert "2 of 19 grid cells have a result" in (quick / "results.md").read_text()


def test_v1_results_of_the_modes_the_slow_loop_changed_are_stale_rl_and_code_stay_current(tmp_path, monkeypatch):
    """rlgpt and rl+config moved past v1 when the slow loop came to act; rl and code did not: their v1 results
    count, but for a (mode, task) bumped on its own (TASK_VERSION)."""
    results, out = tmp_path / "results", tmp_path / "out"
    cells = [grid.Cell("collect_wood", m, 1, 50_000) for m in grid.MODES]
    for c in cells:
        fake_result(results, c, 0.5, 10, version=1)
    calls = []
    monkeypatch.setattr(ablation.subprocess, "Popen", FakeTrain(calls))
    ablation.execute(cells, out, results, [])
    assert [c[c.index("--mode") + 1] for c in calls] == ["rl+config", "rlgpt"]
    fresh = sorted({f"v{grid.results_version(m, 'collect_wood')}" for m in ("rl+config", "rlgpt")})
    assert sorted(p.name for p in out.iterdir()) == fresh and "v1" not in fresh  # fresh directories
    # the committed v1 results (whichever are left: re-runs replace them) split the same way, and the results
    # page lists exactly the stale ones
    v1 = [r for r in grid.load(REPO / "bench" / "results") if r["results_version"] == 1]
    counts = [r["mode"] in ("rl", "code") and (r["mode"], r["task"]) not in grid.TASK_VERSION for r in v1]
    assert [grid.is_current(r) for r in v1] == counts
    page = (REPO / "docs" / "results.md").read_text()
    stale = page.split("Stale, not shown")[1].split("\n")[0] if "Stale, not shown" in page else ""
    assert [grid.cell_of(r).name in stale for r in v1] == [not grid.is_current(r) for r in v1]


def test_a_task_version_override_makes_that_tasks_cells_stale_and_no_other(tmp_path, monkeypatch):
    """A change only one task's runs see (reference/crafter_program.py: `code` on crafter) bumps that (mode,
    task) alone: its result is stale and runs again into its own v<N>/, the mode's other cells stay current,
    and the results page names the override."""
    bumped = grid.RESULTS_VERSION["code"] + 1
    monkeypatch.setitem(grid.TASK_VERSION, ("code", "crafter"), bumped)
    monkeypatch.setitem(grid.TASK_VERSION_NOTES, ("code", "crafter"), "the program changed")
    assert (grid.results_version("code", "crafter"), grid.results_version("code", "collect_wood")) == (
        bumped, grid.RESULTS_VERSION["code"])
    monkeypatch.setattr(ablation, "ROOT", tmp_path)
    md, results = pages(tmp_path), tmp_path / "bench" / "results"
    crafter, wood = grid.Cell("crafter", "code", 1, 1_000_000), grid.Cell("collect_wood", "code", 1, 50_000)
    fake_result(results, crafter, None, 0, version=grid.RESULTS_VERSION["code"], crafter={
        "score": 50.0, "episodes": 10, "achievements": dict.fromkeys(env.ACHIEVEMENTS, 0.0)})
    fake_result(results, wood, 0.9, 10, version=grid.RESULTS_VERSION["code"])
    assert ablation.main(["--table"]) == 0
    text = md.read_text()
    assert f"`code` v{grid.RESULTS_VERSION['code']}, " in text
    assert f"`code` on crafter v{bumped} (the program changed)" in text
    stale = text.split("Stale, not shown")[1].split("\n")[0]
    assert f"crafter__code__s1__1000000 (v{grid.RESULTS_VERSION['code']})" in stale and stale.count("__code__") == 1
    assert ("| ours: code (reference skills, the whole-game routine, not an LLM), seed 1 | 1000000 | — | "
            "measured here: no result yet |") in text
    calls = []
    monkeypatch.setattr(ablation.subprocess, "Popen", FakeTrain(calls))
    ablation.execute([wood, crafter], tmp_path / "out", results, [])
    assert [(c[c.index("--task") + 1], c[c.index("--mode") + 1]) for c in calls] == [("crafter", "code")]
    assert json.loads((results / f"{crafter.name}.json").read_text())["results_version"] == bumped
    assert (tmp_path / "out" / f"v{bumped}" / crafter.name / "summary.md").is_file()


def iterations_of(cmd: list[str]) -> tuple[str, int]:
    """(mode, iterations) as train.py itself parses the command."""
    import train
    args, _, _ = train.parse_args(cmd[2:])
    return args.mode, args.iterations


def test_slowloop_grid_runs_rlgpt_with_3_iterations_against_1_and_has_its_own_table(tmp_path, monkeypatch):
    slow = grid.slowloop_grid()
    assert len(slow) == len(set(slow)) == 27 and {c.seed for c in slow} == set(grid.SEEDS)
    assert {(c.task, c.mode, c.budget) for c in slow} == {
        (t, m, b) for t, b in (("make_stone_pickaxe", 300_000), ("collect_iron", 300_000), ("crafter", 1_000_000))
        for m in ("rlgpt", "rlgpt-1iter", "code")}
    monkeypatch.setattr(ablation, "ROOT", tmp_path)
    md = pages(tmp_path)
    calls = []
    monkeypatch.setattr(ablation.subprocess, "Popen", FakeTrain(calls))
    assert ablation.main(["--grid", "slowloop", "--seeds", "1", "--tasks", "collect_iron"]) == 0
    assert [iterations_of(c) for c in calls] == [("rlgpt", 3), ("rlgpt", 1), ("code", 3)]
    assert [c[c.index("--total-steps") + 1] for c in calls] == ["300000"] * 3
    calls.clear()  # --quick covers it too, and its --iterations 2 does not undo rlgpt-1iter's 1
    assert ablation.main(["--quick", "--grid", "slowloop"]) == 0
    assert [iterations_of(c) for c in calls] == [("rlgpt", 2), ("rlgpt", 1), ("code", 2)] * 3
    quick = (tmp_path / "bench" / "out" / "ablation-quick" / "results.md").read_text()
    assert "Missing: none." in quick.split("With and without the slow loop")[1]
    results = tmp_path / "bench" / "results"
    shutil.rmtree(results)  # FakeTrain's results from the first call
    for c in slow:
        if c.task == "make_stone_pickaxe" and c.seed < 3:
            fake_result(results, c, 0.2 + 0.3 * (c.mode == "rlgpt") + 0.1 * c.seed, 10)
    assert ablation.main(["--table"]) == 0
    text = md.read_text().split("With and without the slow loop")[1]
    assert row_of(text, "make_stone_pickaxe", "300000")[0][2:] == [
        "0.65 ± 0.07 (n=2, 20 ep)", "0.35 ± 0.07 (n=2, 20 ep)", "0.35 ± 0.07 (n=2, 20 ep)",
        "0.65 ± 0.07 (n=2, 16 ep)", "0.35 ± 0.07 (n=2, 16 ep)", "0.35 ± 0.07 (n=2, 16 ep)"]
    assert row_of(text, "collect_iron", "300000")[0][2:] == ["—"] * 6
    assert "Missing (21 of 27 cells):\n- make_stone_pickaxe (300000): rlgpt s3; rlgpt-1iter s3; code s3\n" \
           "- collect_iron (300000): rlgpt s1 s2 s3; rlgpt-1iter s1 s2 s3; code s1 s2 s3\n" in text
    assert "Not in a grid" not in text and "![make_stone_pickaxe](results_make_stone_pickaxe.png)" in text
    assert "What the slow loop did" not in text  # no result kept its iterations: nothing to say
    assert ("Training success per seed, with the slow loop vs without:\n- make_stone_pickaxe: s1 0.600 vs 0.300; "
            "s2 0.700 vs 0.400 (with the loop higher in 2 of 2 seeds)\n") in text and "- collect_iron:" not in text
    looped = fake_result(results, slow[0], 0.5, 10)
    looped["iterations"] = [
        {"iteration": 1, "train": {"success": 0.25, "n": 40}, "change": None, "decided": ["a: try variant b"]},
        {"iteration": 2, "train": {"success": 0.125, "n": 48}, "change": "rolled back: success 0.125: worse",
         "decided": []},
        {"iteration": 3, "train": {"success": 0.3, "n": 50}, "change": None, "decided": []}]
    ablation.write_json(results / f"{slow[0].name}.json", looped)
    assert ablation.main(["--table"]) == 0
    assert (f"- {slow[0].name}: iteration 1: 0.25 (n=40) -> decided: a: try variant b -> iteration 2: 0.12 (n=48), "
            "the change rolled back -> the previous plan trains again -> iteration 3: 0.30 (n=50)\n") in md.read_text()

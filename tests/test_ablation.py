"""bench/ablation.py on fake run directories: table, plots, Crafter section, resume logic; no training."""

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

import env as E
import report

_spec = importlib.util.spec_from_file_location("ablation", Path(__file__).parents[1] / "bench/ablation.py")
A = sys.modules["ablation"] = importlib.util.module_from_spec(_spec)  # bench/ is scripts, not a package
_spec.loader.exec_module(A)


def fake_run(out: Path, run, success: list[float], *, finished: bool = True, evals=(0.5,)) -> Path:
    """A run directory as train.py leaves it: config.json, metrics.jsonl, evals, summary.md when done."""
    d = out / run.name
    d.mkdir(parents=True)
    (d / "config.json").write_text(json.dumps({"args": {"task": run.task, "mode": run.mode, "seed": run.seed,
                                                        "total_steps": run.budget}}))
    steps = np.linspace(run.budget / len(success), run.budget, len(success)).astype(int)
    rows = [{"global_step": int(s), "iteration": 0, "charts/success_rate": v, "losses/value_loss": 0.1}
            for s, v in zip(steps, success, strict=True)]
    rows += [{"global_step": int(steps[-1]), "iteration": 0, "eval/success_rate": e} for e in evals]
    (d / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    if finished:
        (d / "summary.md").write_text("# done\n")
    return d


def final_mean(success: list[float]) -> float:
    """The last 10% of env steps of a curve of evenly spaced updates, computed from the fixture itself."""
    n = len(success)
    steps = np.linspace(1 / n, 1, n)
    return float(np.mean([v for s, v in zip(steps, success, strict=True) if s >= 0.9 - 1e-9]))


def row_of(text: str, *cells: str) -> str:
    rows = [line for line in text.splitlines() if all(f"| {c} |" in line for c in cells)]
    assert len(rows) == 1, rows
    return rows[0]


def test_table_has_mean_and_spread_over_finished_seeds_only(tmp_path):
    rng = np.random.default_rng(0)
    runs = A.plan_runs(["collect_wood"], [1, 2, 3], ["rl", "rlgpt"], quick=True)
    curves = {r: list(rng.uniform(0, 1, 20).round(3)) for r in runs}
    evals = {r: round(float(rng.uniform()), 3) for r in runs}
    for r in runs:
        fake_run(tmp_path, r, curves[r], finished=r.seed != 3 or r.mode == "rlgpt", evals=(0.0, evals[r]))
    text = A.write_report(tmp_path, runs)
    assert text == (tmp_path / "results.md").read_text()
    for mode, seeds in (("rl", [1, 2]), ("rlgpt", [1, 2, 3])):
        done = [r for r in runs if r.mode == mode and r.seed in seeds]
        train = [final_mean(curves[r]) for r in done]
        row = row_of(text, "collect_wood", mode)
        assert f"| {len(seeds)}/3 | {r.budget} |" in row  # the budget is met exactly in the fixture
        assert f"| {np.mean(train):.2f} ± {np.std(train):.2f} |" in row
        ev = [evals[r] for r in done]  # the last evaluation of each run, not the first
        assert f"| {np.mean(ev):.2f} ± {np.std(ev):.2f} |" in row
        assert ", ".join(f"{v:.2f}" for v in train) in row
    assert (tmp_path / "collect_wood.png").stat().st_size > 1000


def test_commands_skip_finished_resume_unfinished_and_refuse_another_budget(tmp_path):
    new, partial, done = A.plan_runs(["place_table"], [1], ["rl", "code", "rlgpt"], quick=True)
    fake_run(tmp_path, partial, [0.1], finished=False)
    fake_run(tmp_path, done, [0.1])
    cmd = A.command_for(new, tmp_path, ["--num-envs", "4"])
    assert cmd[cmd.index("--total-steps") + 1] == str(A.QUICK_BUDGETS["place_table"])
    assert cmd[cmd.index("--run-name") + 1] == new.name and cmd[-2:] == ["--num-envs", "4"]
    assert "--llm" not in cmd  # plain PPO needs no backend
    assert A.command_for(partial, tmp_path, [])[-2:] == ["--resume", str(tmp_path / partial.name)]
    assert A.command_for(done, tmp_path, []) is None
    bigger = A.Run(done.task, done.mode, done.seed, A.BUDGETS["place_table"])
    with pytest.raises(SystemExit, match="holds a run of"):
        A.command_for(bigger, tmp_path, [])


def test_rl_plus_config_is_a_mode_with_the_plans_config_and_its_own_row(tmp_path):
    assert A.MODES == ("rl", "rl+config", "code", "rlgpt")
    (run,) = A.plan_runs(["collect_wood"], [1], ["rl+config"], quick=True)
    cmd = A.command_for(run, tmp_path, [])
    assert cmd[cmd.index("--mode") + 1] == "rl+config" and cmd[cmd.index("--llm") + 1] == "library"
    fake_run(tmp_path, run, [0.25, 0.75])
    assert "| collect_wood | 2000 | rl+config | 1/1 |" in A.write_report(tmp_path, [run])


def test_execute_runs_only_what_is_missing(tmp_path, monkeypatch):
    runs = A.plan_runs(["collect_wood"], [1], ["rl", "rlgpt"], quick=True)
    fake_run(tmp_path, runs[0], [0.5])
    calls = []

    class FakePopen:
        def __init__(self, cmd, **kw):
            calls.append(cmd)

        def wait(self) -> int:
            return 0

    monkeypatch.setattr(A.subprocess, "Popen", FakePopen)
    A.execute(runs, tmp_path, [])
    assert len(calls) == 1 and calls[0][calls[0].index("--mode") + 1] == "rlgpt"
    assert calls[0][calls[0].index("--llm") + 1] == "library"


def test_crafter_score_counts_only_episodes_within_the_budget(tmp_path):
    run = A.Run("crafter", "rl", 1, 3000)
    d = fake_run(tmp_path, run, [0.0])
    wood_diamond = [(1, 0), (0, 0), (2, 0), (1, 1)]
    episodes = [{"length": 1000, "reward": 1.0, "achievement_collect_wood": w,
                 "achievement_collect_diamond": d} for w, d in wood_diamond]
    (d / "stats.jsonl").write_text("".join(json.dumps(e) + "\n" for e in episodes))
    text = "\n".join(A.crafter_section(tmp_path, [run]))
    score, _ = report.crafter_score(d / "stats.jsonl", 3000)
    assert f"| ours: rl | 3000 | {score:.1f} | measured" in text
    assert row_of(text, "collect_diamond").endswith("| 0.0 |")  # the 4th episode is past the budget
    assert row_of(text, "collect_wood").endswith(f"| {200 / 3:.1f} |")
    assert "| human experts | - | 50.5 | published" in text
    assert len([line for line in text.splitlines() if line.startswith("| ") and "published" in line]) == 7
    assert len([line for line in text.splitlines() if line.split(" |")[0][2:] in E.ACHIEVEMENTS]) == 22


def test_what_we_learned_names_the_code_action_that_fails_most_and_the_critic(tmp_path):
    run = A.Run("collect_wood", "rlgpt", 1, A.QUICK_BUDGETS["collect_wood"])
    d = fake_run(tmp_path, run, [0.5])
    (d / "iter_0").mkdir()
    actions = {"chop_tree": {"chosen": 100, "share": 0.2, "success_rate": 0.9, "mean_steps": 5, "errors": []},
               "go_to_tree": {"chosen": 50, "share": 0.1, "success_rate": 0.2, "mean_steps": 30,
                              "errors": [["no tree in view", 40]]}}
    (d / "iter_0" / "stats.json").write_text(json.dumps({"code_actions": actions}))
    (d / "iter_0" / "feedback.json").write_text(json.dumps({"summary": "go_to_tree wanders; let RL explore"}))
    text = A.write_report(tmp_path, [run])
    learned = text.split("## What we learned")[1]
    assert "`go_to_tree` fails most: success 0.20 over 50 calls" in learned
    assert "no tree in view" in learned and "critic: go_to_tree wanders; let RL explore" in learned


def test_report_only_trains_nothing_and_shows_the_logged_budget(tmp_path, monkeypatch):
    monkeypatch.setattr(A.subprocess, "Popen", lambda *a, **k: pytest.fail("--report-only started a run"))
    budget = 2 * A.QUICK_BUDGETS["place_table"]
    fake_run(tmp_path, A.Run("place_table", "rl", 1, budget), [0.5])
    assert A.main(["--report-only", "--quick", "--out", str(tmp_path), "--tasks", "collect_wood", "place_table"]) == 0
    text = (tmp_path / "results.md").read_text()
    assert f"| place_table | {budget} | rl |" in text  # the budget the run logged, not the planned one
    cells = row_of(text, "collect_wood", "rlgpt").split("|")[4:9]
    assert cells == [" 0/1 ", " - ", " - ", " - ", " - "]  # no runs yet: nothing invented
    assert not (tmp_path / "collect_wood.png").exists()


def test_crafter_runs_one_seed_last_and_its_report_survives_another_invocation(tmp_path):
    runs = A.plan_runs(["crafter", "collect_wood"], [1, 2, 3], list(A.MODES), quick=False)
    assert [r.task for r in runs] == ["collect_wood"] * 3 * len(A.MODES) + ["crafter"] * len(A.MODES)
    assert {(r.seed, r.budget) for r in runs if r.task == "crafter"} == {(1, A.CRAFTER_BUDGET)}
    crafter = fake_run(tmp_path, runs[-1], [0.0], finished=False)  # going on in another process
    (crafter / "stats.jsonl").write_text(json.dumps({"length": 200, "achievement_collect_wood": 1}) + "\n")
    assert A.main(["--report-only", "--out", str(tmp_path), "--tasks", "collect_wood"]) == 0
    assert f"| ours: {runs[-1].mode} | {A.CRAFTER_BUDGET} (unfinished) |" in (tmp_path / "results.md").read_text()

"""train.py end to end on `crafter`, the task with no single goal: what the user is shown (the Crafter score where
success would always read 0) and what the critic reads (iter_k/stats.json), checked against the run's own logs."""

import argparse
import contextlib
import io
import json
import warnings

import numpy as np
import pytest

import evidence
import report
import train
from env import ACHIEVEMENTS
from evidence import crafter_score, score_row
from tests.test_train import TINY, history, run_dir


@pytest.fixture(scope="module")
def crafter_run(tmp_path_factory):
    """Plain PPO on `crafter`: two iterations of 750 env steps, 2 evaluation episodes after each; its stdout and
    stderr (the progress bar) together."""
    root = tmp_path_factory.mktemp("crafter")
    shown = io.StringIO()
    with contextlib.redirect_stdout(shown), contextlib.redirect_stderr(shown):
        assert train.main(TINY + ["--task", "crafter", "--mode", "rl", "--iterations", "2", "--total-steps", "1500",
                                  "--eval-episodes", "2", "--runs-dir", str(root)]) == 0
    return run_dir(root), shown.getvalue()


def rows_of(path, iteration: int) -> list[dict]:
    return [r for r in report.read_jsonl(path) if r["iteration"] == iteration]


def test_the_bar_the_log_line_and_the_summary_show_the_crafter_score_with_its_n(crafter_run):
    d, shown = crafter_run
    summary = (d / "summary.md").read_text()
    assert "| train score (n) | eval score |" in summary and "![score](score.png)" in summary
    assert (d / "score.png").is_file() and "success=" not in shown and "train success" not in shown
    for h in history(d):
        trained, evaluated = rows_of(d / "stats.jsonl", h["iteration"]), rows_of(d / "eval.jsonl", h["iteration"])
        assert trained and len(evaluated) == 2
        assert h["score"] == score_row(crafter_score(trained)) and h["score"]["episodes"] == len(trained)
        assert h["eval_score"] == score_row(crafter_score(evaluated)) and h["eval_score"]["episodes"] == 2
        train_text, eval_text = report.score_text(h["score"]), report.score_text(h["eval_score"])
        assert f"[iter {h['iteration']}] env steps {h['env_steps']}: train score {train_text}, eval score {eval_text}" \
            in shown
        assert f"| {h['iteration']} | {h['env_steps']} | {train_text} | {eval_text} |" in summary
        # the bar's last state: the score of every training episode that finished in the iteration, and their n
        unlocked = np.mean([[r[f"achievement_{a}"] > 0 for a in ACHIEVEMENTS] for r in trained], axis=0)
        assert f"score={float(report.score_of(unlocked)):.1f} (n={len(trained)})]" in shown
    every = report.read_jsonl(d / "stats.jsonl")  # the whole run's line: its score and the n it is computed over
    whole = float(report.score_of(np.mean([[r[f"achievement_{a}"] > 0 for a in ACHIEVEMENTS] for r in every], axis=0)))
    assert f"Crafter score over all training episodes: {whole:.1f} (n={len(every)})" in summary


def test_a_crafter_run_with_no_finished_episode_says_so_instead_of_a_score_of_nothing(tmp_path):
    """Too short for an episode to end: the summary says n=0 (no 'nan', no empty achievement table), and the
    plot of nothing draws no empty legend (a warning the user would see)."""
    args = argparse.Namespace(task="crafter", mode="code", seed=1, eval_episodes=1)
    history = [{"iteration": 1, "env_steps": 40, "train_success": None, "eval_success": 0.0, "eval_length": 200.0,
                "code_actions": ["solve_task"], "llm_calls": 0, "score": None, "eval_score": None}]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        report.write_summary(tmp_path, history, args)
    summary = (tmp_path / "summary.md").read_text()
    assert "Crafter score over the training episodes: none has finished yet (n=0)." in summary
    assert "nan" not in summary and "| achievement |" not in summary
    assert report.main([str(tmp_path / "nowhere")]) == 2  # python report.py <not a run directory>: a sentence
    with pytest.raises(SystemExit) as e:  # and python evidence.py
        evidence.main([str(tmp_path / "nowhere")])
    assert e.value.code == 2


def test_stretches_split_the_run_by_env_steps_not_by_episode_count():
    rows = [{"length": n} for n in (10, 10, 10, 10, 60)]  # 100 env steps: four short episodes, then a long one
    assert evidence.placed(rows) == [10, 20, 30, 40, 100]
    assert [len(part) for part in evidence.shares(rows, 2)] == [4, 1]
    assert [len(part) for part in evidence.shares(rows, 4)] == [2, 2, 0, 1] and evidence.shares([], 3) == [[], [], []]


def test_python_evidence_parts_prints_each_stretchs_score_and_n_and_the_whole_runs(crafter_run, capsys):
    d, _ = crafter_run
    rows = report.read_jsonl(d / "stats.jsonl")
    assert evidence.main([str(d), "--parts", "2"]) == 0
    shown = capsys.readouterr().out
    for part in evidence.shares(rows, 2) + [rows]:
        s = crafter_score(part)
        assert f"Crafter score {s['score']:.2f} +- {s['se']:.2f} (n={len(part)} episodes)" in shown
    finished, run_steps = sum(r["length"] for r in rows), history(d)[-1]["env_steps"]
    assert f"{len(rows)} finished training episodes, {finished} env steps (of the run's {run_steps}; the other " \
        f"{run_steps - finished} are in episodes unfinished at its end)" in shown


def test_against_pairs_two_runs_on_the_worlds_both_played(crafter_run, tmp_path, capsys):
    """--against: each stretch scores both runs over the episodes whose world both played, and their difference."""
    d, _ = crafter_run
    rows = report.read_jsonl(d / "stats.jsonl")
    other = tmp_path / "other"  # a run that played the first half of these worlds and unlocked nothing in them
    other.mkdir()
    (other / "config.json").write_text((d / "config.json").read_text())
    nothing = [{**r, **{f"achievement_{a}": 0 for a in ACHIEVEMENTS}} for r in rows[:len(rows) // 2]]
    (other / "stats.jsonl").write_text("".join(json.dumps(r) + "\n" for r in nothing + [dict(rows[0], seed=-5)]))
    assert [a["seed"] for a, _ in evidence.matched(rows, report.read_jsonl(other / "stats.jsonl"))] == \
        [r["seed"] for r in rows[:len(rows) // 2]]
    assert evidence.main([str(d), "--parts", "1", "--against", str(other)]) == 0
    mine, zero = crafter_score(rows[:len(rows) // 2]), crafter_score(nothing)
    shown = capsys.readouterr().out
    assert f"on the {len(nothing)} worlds both runs played: Crafter score {mine['score']:.2f} +- {mine['se']:.2f} " \
        f"against Crafter score 0.00 +- 0.00, difference {mine['score']:+.2f}" in shown
    assert mine["score"] > zero["score"] == 0.0
    with pytest.raises(SystemExit):  # --against needs --parts
        evidence.main([str(d), "--against", str(other)])


def test_stats_json_holds_the_evaluation_episodes_own_mean_length(crafter_run):
    d, _ = crafter_run
    for iteration in (1, 2):
        lengths = [r["length"] for r in rows_of(d / "eval.jsonl", iteration)]
        stats = json.loads((d / f"iter_{iteration}" / "stats.json").read_text())
        assert stats["eval_episodes"] == len(lengths) == 2
        assert stats["eval_mean_length"] == pytest.approx(np.mean(lengths))
        evaluated = rows_of(d / "eval.jsonl", iteration)  # and their score, which the critic reads on crafter
        assert stats["eval_score"] == score_row(crafter_score(evaluated)) and stats["eval_score"]["episodes"] == 2


def test_the_running_score_reads_only_new_whole_rows_of_its_iteration(tmp_path):
    path, none = tmp_path / "stats.jsonl", {f"achievement_{a}": 0 for a in ACHIEVEMENTS}
    wood, later = json.dumps(dict(none, iteration=2, achievement_collect_wood=1)), json.dumps(dict(none, iteration=2))
    score = evidence.RunningScore(path, iteration=2)
    assert score.update() == "-"  # no file yet
    path.write_text(json.dumps(dict(none, iteration=1, achievement_collect_wood=1)) + "\n" + wood + "\n" + later[:9])
    one_of = np.eye(len(ACHIEVEMENTS))[ACHIEVEMENTS.index("collect_wood")]  # collect_wood's unlock share is 1
    assert score.update() == f"{float(report.score_of(one_of)):.1f} (n=1)"  # iteration 1's row and the cut one left out
    with open(path, "a") as f:  # the row cut short is completed, and another follows
        f.write(later[9:] + "\n" + later + "\n")
    assert score.update() == f"{float(report.score_of(one_of / 3)):.1f} (n=3)"


def test_the_reference_crafter_plan_asks_ppo_to_follow_its_order(tmp_path):
    """train.py with the reference crafter plan (follow_order) turns the teacher on: PPO logs its weight, falling
    from --teacher-coef to --teacher-min at --teacher-frac of the budget (the env's side:
    tests/test_code_action_masks.py)."""
    shown = io.StringIO()
    with contextlib.redirect_stdout(shown), contextlib.redirect_stderr(shown):
        assert train.main(TINY + ["--task", "crafter", "--mode", "rlgpt", "--iterations", "1", "--total-steps", "1200",
                                  "--skills", "none", "--teacher-frac", "0.5", "--teacher-min", "0.1",
                                  "--runs-dir", str(tmp_path)]) == 0
    updates = [m for m in report.read_jsonl(run_dir(tmp_path) / "metrics.jsonl") if "losses/policy_loss" in m]
    coefs = [(m["global_step"], m["charts/teacher_coef"]) for m in updates]
    assert 0.5 < coefs[0][1] <= 1.0 and all(c == 0.1 for step, c in coefs if step >= 600), coefs
    # what the critic and the user read: the iteration's decisions where the order named a code action, summed
    order = json.loads((run_dir(tmp_path) / "iter_1" / "stats.json").read_text())["order"]
    named, followed = (sum(m[f"charts/order_{k}"] for m in updates) for k in ("named", "followed"))
    assert (order["named"], order["followed"]) == (named, followed) and 0 <= followed <= named and named > 0
    assert order["teacher_coef"] == [round(coefs[0][1], 3), 0.1]
    assert f"the plan's order named a code action at {named} decisions; the RL agent chose it at " \
        f"{order['share']:.1%} of them" in shown.getvalue()

"""What one iteration of train.py's loop counts while it trains, and what it writes once evaluated.

IterationTally counts the training episodes that finish in the iteration (and how many succeed), the code
actions' statistics and, under a plan's follow_order, how closely the RL agent keeps to the order; it drives the
progress bar and the metric log, and its counts go into a mid-iteration checkpoint so a resume goes on counting.
After evaluation, record_iteration writes stats.json (what the critic reads), eval.jsonl and the iteration's row of
the run's history; record_feedback writes the critic's decision. The files themselves and the rules that keep them
consistent over a crash are run_dir.py's.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from tqdm import tqdm

import evidence
import report
from code_actions import ActionSet, CodeStats
from fast_agent import save_attempts
from run_dir import llm_calls, log_metrics, write_rows
from run_state import LoopState, Run


class IterationTally:
    """What one iteration has counted: the training episodes that finished in it (and how many succeeded),
    the success trend, the code actions' statistics (CodeStats); its progress bar and metric logging. A
    checkpoint inside the iteration keeps the counts (checkpoint()), so a resume goes on counting from there. The
    bar shows the last update's success, or on `crafter` (no goal) the score so far (evidence.RunningScore)."""

    def __init__(self, run: Run, action_set: ActionSet, progress: dict | None, total: int, initial: int):
        self.run, self.stats, self.trend, self.last = run, CodeStats(action_set), [], None
        self.score = evidence.RunningScore(run.dir / "stats.jsonl", run.iteration + 1) \
            if run.rank == 0 and evidence.no_goal(run.args.task) else None
        self.counted = {"episodes": 0, "successes": 0}
        if progress is not None and run.rank == 0:  # rank 0 holds every rank's counts up to the checkpoint
            self.stats.restore(progress["decisions"], progress["rows"], progress.get("episodes"))
            self.trend, self.counted = progress["trend"], progress["counted"]
        self.bar = tqdm(total=total, initial=initial, desc=f"iter {run.iteration + 1}/{run.args.iterations}",
                        unit="step", dynamic_ncols=True, disable=run.rank > 0,
                        mininterval=0.5 if sys.stderr.isatty() else 30)  # a log file gets a line every 30 s

    def on_log(self, metrics: dict, step: int) -> None:
        log_metrics(self.run, metrics, step)
        if "charts/success_rate" in metrics:  # the episodes that finished in this update, and how many
            n = metrics["charts/success_episodes"]
            self.counted["episodes"] += n
            self.counted["successes"] += round(metrics["charts/success_rate"] * n)
            self.trend.append(round(metrics["charts/success_rate"], 3))
            self.last = f"{self.trend[-1]:.2f} (n={n})"
        if "charts/order_named" in metrics:  # under follow_order (ppo.py): the order's decisions, its weight
            c = self.counted
            c["order_named"] = c.get("order_named", 0) + metrics["charts/order_named"]
            c["order_followed"] = c.get("order_followed", 0) + metrics["charts/order_followed"]
            c.setdefault("teacher_coef_first", metrics["charts/teacher_coef"])
            c["teacher_coef_last"] = metrics["charts/teacher_coef"]
        shown = {"success": self.last} if self.score is None else {"score": self.score.update()}
        self.bar.set_postfix(SPS=metrics.get("charts/SPS"), llm=llm_calls(self.run), **shown)

    def checkpoint(self) -> dict:
        """The counts so far, summed over the ranks: every rank calls this (a collective), rank 0 saves it."""
        decisions, rows, episodes = self.stats.totals()
        return {"decisions": decisions, "rows": rows, "episodes": episodes, "trend": list(self.trend),
                "counted": dict(self.counted)}

    def order(self) -> dict | None:
        """Under a plan with follow_order: at how many of this iteration's decisions its order named a code action
        that could start, at how many of those the RL agent chose it, and the teacher's weight at the iteration's
        first and last update; None without an order (or before the first update)."""
        c = self.counted
        if not c.get("order_named"):
            return None
        return {"named": c["order_named"], "followed": c["order_followed"],
                "share": round(c["order_followed"] / c["order_named"], 4),
                "teacher_coef": [round(c["teacher_coef_first"], 3), round(c["teacher_coef_last"], 3)]}

    def train_success(self) -> tuple[float | None, int]:
        """(success rate, episodes) of the training episodes that finished in this iteration."""
        n = self.counted["episodes"]
        return (round(self.counted["successes"] / n, 3) if n else None), n


def record_skills(run: Run, action_set: ActionSet, stats: CodeStats, task: str, iteration: int) -> None:
    """The iteration's code-action statistics into the shared skill library (if the run uses one), after
    every iteration so a crash loses at most this one's numbers; one that cannot be written is a warning."""
    if run.skill_library is None:
        return
    try:
        run.skill_library.record_iteration(action_set.actions, stats.rows, task=task, run=str(run.dir.resolve()),
                                           iteration=iteration)
    except OSError as e:
        tqdm.write(f"[iter {iteration}] warning: the skill library could not be written ({e}); the run goes on")


def last_code_stats(run: Run, it: int) -> dict:
    """Each code action's row of the last stats.json, {} before any: a rewrite sees what its code did. `it` is
    the iteration now (0-based), so iter_<it>/ (the directories count from 1) is the one before it."""
    path = run.dir / f"iter_{it}" / "stats.json"
    return json.loads(path.read_text()).get("code_actions", {}) if path.is_file() else {}


def record_attempts(attempts: list, it_dir: Path, name: str, iteration: int) -> None:
    """The fast agent's attempts at one sub-action: each in <it_dir>/attempts/, one line per failed one."""
    save_attempts(attempts, it_dir / "attempts", name)
    for n, a in enumerate(attempts, 1):
        if a.error:
            tqdm.write(f"[iter {iteration}] {name} attempt {n} failed: {a.error.splitlines()[0][:160]}")


def record_iteration(run: Run, state: LoopState, critic_stats: dict, ev: dict, stats: CodeStats,
                     action_set: ActionSet, rl_config: dict, n_actions: int, t0: float) -> None:
    """Rank 0, after an iteration's evaluation (`ev`): eval.jsonl, the eval and code-action metrics, the eval
    GIF, stats.json (what the critic reads), the iteration's row of the run's history (summary.md and the
    ablation tables are made from it; wall_s counts from `t0`), and one line for the user."""
    iteration, step = critic_stats["iteration"], critic_stats["env_steps"]  # iteration: 1-based, as iter_1/
    write_rows(run.dir / "eval.jsonl", ev["rows"])
    log_metrics(run, {"eval/success_rate": ev["success_rate"], "eval/episodic_length": ev["mean_length"],
                      "eval/episodic_return": ev["mean_return"]}, step)
    for name, row in stats.summary().items():
        log_metrics(run, {f"code/{name}/share": row["share"], f"code/{name}/success_rate": row["success_rate"]},
                    step)
    it_dir = run.dir / f"iter_{iteration}"
    it_dir.mkdir(exist_ok=True)
    if run.args.capture_video and ev["frames"]:
        report.write_gif(it_dir / "eval.gif", ev["frames"])
    (it_dir / "stats.json").write_text(json.dumps(critic_stats, indent=2))
    train_success, n_train = critic_stats["success_rate"], critic_stats["success_episodes"]
    score, no_goal = critic_stats["score"], evidence.no_goal(run.args.task)  # no goal: the score stands for success (0)
    eval_score = evidence.score_row(evidence.crafter_score(ev["rows"])) if no_goal else None
    state.history.append({
        "iteration": iteration, "env_steps": step, "train_success": train_success, "train_episodes": n_train,
        "eval_success": ev["success_rate"], "eval_length": ev["mean_length"], "eval_env_steps": ev["env_steps"],
        "code_actions": list(action_set.active.values()), "rl_config": rl_config,
        "hand_written": action_set.hand_written(), "episode_lengths": critic_stats["episode_lengths"],
        "score": evidence.score_row(score), "eval_score": eval_score, "llm_calls": llm_calls(run),
        "reused": state.reused, "n_actions": n_actions, "curriculum": _curriculum_row(state.curriculum),
        "wall_s": round(time.time() - t0, 1)})
    train, evaluated = (f"score {report.score_text(score)}", f"score {report.score_text(eval_score)}") if no_goal \
        else (f"success {report.rate_text(train_success, n_train)}",
              f"success {report.rate_text(ev['success_rate'], critic_stats['eval_episodes'])}")
    tqdm.write(f"[iter {iteration}] env steps {step}: train {train}, eval {evaluated}")
    if order := critic_stats.get("order"):  # under follow_order: is it RL or the taught order that chooses?
        tqdm.write(f"[iter {iteration}] the plan's order named a code action at {order['named']} decisions; the RL "
                   f"agent chose it at {order['share']:.1%} of them (teacher weight {order['teacher_coef'][0]:.2f} "
                   f"-> {order['teacher_coef'][1]:.2f})")


def record_feedback(run: Run, state: LoopState, iteration: int, feedback) -> None:
    """The critic's decision: the feedback the next plan reads, iter_k/feedback.json and the log's lines."""
    state.feedback = feedback.to_dict()
    (run.dir / f"iter_{iteration}" / "feedback.json").write_text(json.dumps(feedback.to_dict(), indent=2))
    tqdm.write(f"[iter {iteration}] critic: {feedback.summary}")
    for reason in feedback.reasons:
        tqdm.write(f"[iter {iteration}] critic decided: {reason}")


def _curriculum_row(saved: dict | None) -> dict | None:
    """The curriculum as the history keeps it: the chain, the sub-task being trained, the stages done."""
    if not saved:
        return None
    current = saved["subtasks"][saved["stage"]] if saved["stage"] < len(saved["subtasks"]) else None
    return {"subtasks": saved["subtasks"], "current": current, "stages": saved["stages"]}


def episode_rows(run: Run, iteration: int) -> list[dict]:
    """The Crafter stats rows (stats.jsonl) of the training episodes that ended in this iteration."""
    path = run.dir / "stats.jsonl"
    return [r for r in report.read_jsonl(path) if r.get("iteration") == iteration] if path.is_file() else []


def log_rejections(it: int, what: str, slow) -> None:
    """One line per reply the slow agent rejected, in the user's words (the model got its own)."""
    for n, problem in enumerate(slow.last_rejections, 1):
        tqdm.write(f"[iter {it + 1}] {what} reply {n} rejected: {problem[:200]}")

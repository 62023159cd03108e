"""The ablation grid (plain PPO, PPO with the plan's config, one program, RL-GPT) and the slow loop's, as data.

    python -m bench.ablation                 # run every grid cell that has no current result (days on 2 cores)
    python -m bench.ablation --tasks collect_wood --modes rl rlgpt --seeds 1    # only a slice of the grid
    python -m bench.ablation --grid slowloop     # the slow-loop grid instead (--quick, slices: the same)
    python -m bench.ablation --table         # rebuild README.md's results section (both grids), docs/results_*.png
    python -m bench.ablation --check         # exit 1 if README.md's results section differs from the data
    python -m bench.ablation --quick         # smoke test: 1 seed, tiny budgets, all of it under bench/out/
    python -m bench.ablation -- --num-envs 16                # anything after -- goes to every train.py run

Run it from the repo root as a module (as above). A cell is (task, mode, seed, env-step budget). Its run
is `train.py` in a subprocess, one at a time, in bench/out/ablation/v<its mode's version>/<cell>/
(git-ignored; an interrupted run is continued with --resume). Its result, a few kB read from the run's
logs, is written atomically to bench/results/<cell>.json the moment it finishes, to be committed with the
code. A cell with a current result never runs again.

Stale results: RESULTS_VERSION holds one number per mode, bumped by hand in any commit that changes what
that mode's runs measure (trainer, learner, env, skills, budgets' meaning). A result counts iff its
`results_version` is its mode's number; any other is stale: listed, not shown, and its cell runs again
into a fresh v<N>/ directory. v2 of `rlgpt` and `rl+config`: "the slow loop acts" (the critic's decisions
change the next iteration, a worse change is rolled back, long tasks train their sub-tasks as a
curriculum); `rl` and `code` runs did not change: v1. Each run's commit is recorded for audit only.

The modes separate the two things RL-GPT adds to PPO: `rl+config` is plain PPO with the plan's action
mask and reward shaping but no code action, so rl -> rl+config measures the plan's RL config alone and
rl+config -> rlgpt the code actions alone. The slow-loop grid (issue 15) measures the slow loop: `rlgpt`
(train.py's default `--iterations 3`) against `rlgpt-1iter`, i.e. `rlgpt` run with `--iterations 1` (one
plan, the critic never acts), at 300k env steps. `rlgpt-1iter` is rlgpt's control: bump both together.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import NoReturn

import numpy as np

import env as E
import report

# Per mode: bump a mode's number by hand when what its runs measure changes (see the docstring).
RESULTS_VERSION = {"rl": 1, "rl+config": 2, "code": 1, "rlgpt": 2, "rlgpt-1iter": 2}
VERSION_NOTES = {"rl+config": "the slow loop acts", "rlgpt": "the slow loop acts", "rlgpt-1iter": "rlgpt's control"}
ROOT = Path(__file__).resolve().parent.parent
MODES = ("rl", "rl+config", "code", "rlgpt")
SLOWLOOP_MODES = ("rlgpt", "rlgpt-1iter")
SLOWLOOP = {"make_stone_pickaxe": 300_000, "collect_iron": 300_000}  # the slow-loop grid's tasks and budgets
QUICK_SLOWLOOP = {"make_stone_pickaxe": 2_500, "collect_iron": 2_500}
SLOWLOOP_TITLE = ("**With and without the slow loop** (`--grid slowloop`): `rlgpt` (`--iterations 3`: the critic's "
                  "decisions change the next iteration) against `rlgpt-1iter` (`rlgpt` with `--iterations 1`: one "
                  "plan, the critic never acts); training success at the budget and evaluation success as above.")
SLOWLOOP_COLUMNS = [(f"{what}: {label}", mode, key) for key, what in (("train", "training"), ("eval", "evaluation"))
                    for mode, label in (("rlgpt", "with (`rlgpt`)"), ("rlgpt-1iter", "without (`rlgpt-1iter`)"))]
SEEDS = (1, 2, 3)
BUDGETS = {"collect_wood": 50_000, "place_table": 100_000, "make_wood_pickaxe": 200_000,
           "collect_stone": 300_000, "crafter": 1_000_000}
CRAFTER_MODES = ("rl", "rlgpt")  # crafter: seed 1 only (1M steps is a day here)
# --quick is a smoke test of the pipeline (RL barely starts); its results never enter bench/results/.
QUICK_BUDGETS = {"collect_wood": 2_000, "place_table": 2_000, "make_wood_pickaxe": 2_500,
                 "collect_stone": 2_500, "crafter": 5_000}
# --quick also shrinks what is not training: a failing policy's evaluation episode runs to the task's
# step limit (up to 1000 steps, one forward pass each), and one PPO rollout is num_envs * num_steps.
QUICK_TRAIN_ARGS = ["--iterations", "2", "--eval-episodes", "1", "--num-envs", "4", "--num-steps", "64",
                    "--no-capture-video"]
POINTS = 10  # the success curve: at budget * k / POINTS, k = 1..POINTS
# Quoted, not measured: ../shared/paper-notes.md (Crafter's scoreboard): (agent, env steps, score).
PUBLISHED = [("random", "-", 1.6), ("SB3 PPO", "1M", 4.6), ("DreamerV3", "1M", 14.5),
             ("PPO-ResNet", "1M", 15.6), ("Achievement Distillation", "1M", 21.8),
             ("SPRING (GPT-4, no training)", "-", 27.3), ("human experts", "-", 50.5)]
MARKERS = ("<!-- results:start -->", "<!-- results:end -->")


@dataclass(frozen=True)
class Cell:
    """One cell of the grid; its name names both its run directory and its result file."""

    task: str
    mode: str
    seed: int
    budget: int

    @property
    def name(self) -> str:
        return f"{self.task}__{self.mode}__s{self.seed}__{self.budget}"


def grid(quick: bool = False) -> list[Cell]:
    """Cheap tasks first, all modes of a seed together, so a long ablation has a complete small table
    early; crafter (two modes, seed 1) last."""
    budgets = QUICK_BUDGETS if quick else BUDGETS
    return [Cell(task, mode, seed, budget) for task, budget in budgets.items()
            for seed in (SEEDS[:1] if quick or task == "crafter" else SEEDS)
            for mode in (CRAFTER_MODES if task == "crafter" else MODES)]


def slowloop_grid(quick: bool = False) -> list[Cell]:
    """Both modes of a seed together, so the comparison is complete seed by seed."""
    return [Cell(task, mode, seed, budget) for task, budget in (QUICK_SLOWLOOP if quick else SLOWLOOP).items()
            for seed in (SEEDS[:1] if quick else SEEDS) for mode in SLOWLOOP_MODES]


def is_current(r: dict) -> bool:
    """A result counts iff it was measured at its mode's version (a mode no longer run never counts)."""
    return r.get("mode") in RESULTS_VERSION and r.get("results_version") == RESULTS_VERSION[r["mode"]]


# ----------------------------------------------------------------------------------------------
# One run's logs -> one result.


def episodes(run_dir: Path) -> list[tuple[int, dict]]:
    """(position, row) of every finished training episode in stats.jsonl (one row per episode, in the order
    they finished). Position = env steps of all episodes finished so far, this one's included: stats.jsonl
    has no step counter. It trails the trainer's counter by the steps of the episodes still running then
    (< num_envs x the task's step limit; they end up in unfinished.jsonl, and the result's `finished`
    shows how much of the run the finished episodes cover)."""
    rows = report.read_jsonl(run_dir / "stats.jsonl")
    return list(zip(np.cumsum([r["length"] for r in rows]).tolist(), rows, strict=True))


def succeeded(row: dict, task: str) -> bool:
    """The row's own `success` if it has one, else: the task's achievement unlocked."""
    return bool(row["success"]) if "success" in row else row.get(f"achievement_{E.get_task(task).achievement}", 0) > 0


def curve(eps: list[tuple[int, dict]], cell: Cell) -> list[dict]:
    """At each point s = budget * k / POINTS: the episodes whose position lies in (s - budget / POINTS, s],
    their count n and their success rate (crafter: mean achievements unlocked per episode); None if n = 0.
    Episodes past the budget count nowhere."""
    points = []
    for k in range(1, POINTS + 1):
        lo, hi = cell.budget * (k - 1) // POINTS, cell.budget * k // POINTS
        window = [row for pos, row in eps if lo < pos <= hi]
        if cell.task == "crafter":
            value = [sum(v > 0 for a, v in row.items() if a.startswith("achievement_")) for row in window]
            points.append({"step": hi, "n": len(window),
                           "achievements": round(float(np.mean(value)), 3) if window else None})
        else:
            ok = [succeeded(row, cell.task) for row in window]
            points.append({"step": hi, "n": len(window), "success": round(float(np.mean(ok)), 4) if ok else None})
    return points


def iterations(run_dir: Path) -> list[dict]:
    """Per iteration: what its code actions did (calls, success, commonest error) and the critic's summary,
    from iter_k/stats.json and iter_k/feedback.json, so the results' "why" can be written from this file."""
    out = []
    for path in sorted(run_dir.glob("iter_*/stats.json"), key=lambda p: int(p.parent.name.split("_")[1])):
        stats, feedback = json.loads(path.read_text()), path.parent / "feedback.json"
        actions = {name: {"chosen": row["chosen"], "success_rate": row["success_rate"],
                          "error": str(row["errors"][0][0])[:120] if row.get("errors") else None}
                   for name, row in stats.get("code_actions", {}).items()}
        critic = json.loads(feedback.read_text()).get("summary", "")[:300] if feedback.is_file() else None
        out.append({"iteration": stats.get("iteration"), "env_steps": stats.get("env_steps"),
                    "code_actions": actions, "critic": critic})
    return out


def result_of(cell: Cell, run_dir: Path) -> dict:
    """Everything the table needs about a finished run, read from its own files."""
    config = json.loads((run_dir / "config.json").read_text())
    metrics = report.read_jsonl(run_dir / "metrics.jsonl")
    attempts = report.read_jsonl(run_dir / "attempts.jsonl")
    eps = episodes(run_dir)
    points = curve(eps, cell)
    evals = [r["eval/success_rate"] for r in metrics if "eval/success_rate" in r]
    env_steps = max((r["global_step"] for r in metrics), default=0)
    wall = round(sum(a["wall_s"] for a in attempts), 1)
    commits = list(dict.fromkeys(a["commit"] for a in attempts))
    result = {"results_version": RESULTS_VERSION[cell.mode], "task": cell.task, "mode": cell.mode, "seed": cell.seed,
              "budget": cell.budget, "env_steps": env_steps,
              "commit": commits[0] if commits else "unknown", "resumed_at_commits": commits[1:],
              "dirty": any(a["dirty"] for a in attempts), "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
              "machine": attempts[0]["machine"] if attempts else None, "attempts": len(attempts),
              "wall_s": wall, "sps": round(env_steps / wall, 1) if wall else None,
              "device": config.get("device"), "bf16_update": config.get("bf16_update"),
              "backend": config.get("backend"), "curve": points,
              # how much of env_steps the finished episodes cover (the rest: episodes cut off or still going)
              "finished": {"episodes": len(eps), "env_steps": eps[-1][0] if eps else 0},
              "train": {"window": [cell.budget * (POINTS - 1) // POINTS, cell.budget], "n": points[-1]["n"],
                        "success": points[-1].get("success")},
              "eval": {"success": evals[-1] if evals else None,
                       "n": config["args"]["eval_episodes"] if evals else 0},
              "iterations": iterations(run_dir)}
    if cell.task == "crafter":
        score, rates = report.crafter_score(run_dir / "stats.jsonl", cell.budget)
        result["crafter"] = {"episodes": sum(pos <= cell.budget for pos, _ in eps),
                             "score": round(score, 2), "achievements": {a: round(p, 2) for a, p in rates.items()}}
    return result


def write_json(path: Path, data: dict) -> None:
    """Atomically: a reader (or a crash) never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    os.replace(tmp, path)


def fail(message: str) -> NoReturn:
    """Bad input: a sentence on stderr and exit status 2, no traceback."""
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)


def read_result(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        fail(f"{path} is not a readable result file ({e}); fix or delete it")


# ----------------------------------------------------------------------------------------------
# Running the cells that have no current result.


def git_state() -> tuple[str, bool]:
    """(HEAD, dirty): dirty = a tracked .py file differs from HEAD (the code that ran is not the commit)."""
    def git(*a: str) -> str:
        return subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", "*.py")
    return git("rev-parse", "HEAD") or "unknown", bool(dirty)


def machine() -> dict:
    """CPU model and cores, and the GPU if nvidia-smi sees one."""
    info = Path("/proc/cpuinfo").read_text().splitlines() if Path("/proc/cpuinfo").is_file() else []
    cpu = next((line.split(":", 1)[1].strip() for line in info if line.startswith("model name")), "unknown")
    gpu = None
    if shutil.which("nvidia-smi"):
        gpu = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                             capture_output=True, text=True).stdout.strip().splitlines()[:1] or None
    return {"cpu": cpu, "cores": os.cpu_count(), "gpu": gpu[0] if gpu else None}


def command_for(cell: Cell, run_dir: Path, extra: list[str]) -> list[str]:
    """The train.py command that starts `cell`, or continues its unfinished run."""
    if (run_dir / "config.json").is_file():
        return [sys.executable, str(ROOT / "train.py"), "--resume", str(run_dir)]
    llm = [] if cell.mode == "rl" else ["--llm", "library"]  # rl+config needs the plan, code the program
    # rlgpt-1iter's --iterations 1 comes last: nothing in `extra` (--quick's --iterations 2) may undo it
    mode, defining = ("rlgpt", ["--iterations", "1"]) if cell.mode == "rlgpt-1iter" else (cell.mode, [])
    # --skills none: no skill library shared between cells, so no cell (or seed) reuses another's skills
    return [sys.executable, str(ROOT / "train.py"), "--task", cell.task, "--mode", mode, *llm, "--skills", "none",
            "--seed", str(cell.seed), "--total-steps", str(cell.budget), "--runs-dir", str(run_dir.parent),
            "--run-name", run_dir.name, *extra, *defining]


def attempt(cmd: list[str], run_dir: Path) -> int:
    """One train.py process, its output in train.log; attempts.jsonl gets its commit, machine and wall time."""
    run_dir.mkdir(parents=True, exist_ok=True)
    commit, dirty = git_state()
    row = {"commit": commit, "dirty": dirty, "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
           "machine": machine(), "resume": "--resume" in cmd}
    t0 = time.time()
    with open(run_dir / "train.log", "a") as log:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        try:
            rc = proc.wait()
        except KeyboardInterrupt:  # train.py got the Ctrl-C too: let it write its checkpoint
            rc = proc.wait()
    with open(run_dir / "attempts.jsonl", "a") as f:
        f.write(json.dumps(dict(row, wall_s=round(time.time() - t0, 1), rc=rc)) + "\n")
    return rc


def execute(cells: list[Cell], out: Path, results: Path, extra: list[str]) -> None:
    """Each cell without a current result: run (or continue) it, then write its result at once."""
    start = time.time()
    for i, cell in enumerate(cells, 1):
        head, path = f"[{i}/{len(cells)}] {cell.name}", results / f"{cell.name}.json"
        if path.is_file() and is_current(read_result(path)):
            print(f"{head}: has a result, skipped", flush=True)
            continue
        run_dir = out / f"v{RESULTS_VERSION[cell.mode]}" / cell.name  # a stale run is never resumed as current
        if not (run_dir / "summary.md").is_file():
            cmd = command_for(cell, run_dir, extra)
            print(f"{head}: {'resuming' if '--resume' in cmd else 'running'} in {run_dir} ...", end=" ", flush=True)
            t0, rc = time.time(), attempt(cmd, run_dir)
            if rc in (130, -2):
                raise SystemExit(f"\ninterrupted: the same command continues {cell.name}")
            if rc != 0 or not (run_dir / "summary.md").is_file():
                print(f"FAILED (exit {rc}, see {run_dir / 'train.log'})", flush=True)
                continue
            print(f"finished in {time.time() - t0:.0f}s;", end=" ")
        write_json(path, result_of(cell, run_dir))
        print(f"result: {path} (elapsed {(time.time() - start) / 60:.1f} min)", flush=True)


# ----------------------------------------------------------------------------------------------
# bench/results/ -> the README's results section and plots, from the result files alone.


def load(results: Path) -> list[dict]:
    return [read_result(p) for p in sorted(results.glob("*.json"))]


def cell_of(r: dict) -> Cell:
    return Cell(r["task"], r["mode"], r["seed"], r["budget"])


def mean_sd(values: list[tuple[float | None, int]]) -> str:
    """"mean ± sd (n=seeds, episodes pooled)" over the seeds that have a value (sd: ddof=1); "—" if none."""
    vals = [(v, n) for v, n in values if v is not None]
    if not vals:
        return "—"
    x, eps = np.array([v for v, _ in vals]), sum(n for _, n in vals)
    spread = f" ± {x.std(ddof=1):.2f}" if len(x) > 1 else ""
    return f"{x.mean():.2f}{spread} (n={len(x)}, {eps} ep)"


def success_table(title: str, current: dict[Cell, dict], cells: list[Cell], columns: list[tuple]) -> list[str]:
    """A row per task; a column per (header, mode, "train" or "eval"): that mode's seeds, mean ± sd."""
    budgets = dict.fromkeys((c.task, c.budget) for c in cells if c.task != "crafter")
    lines = [title, "", "| task | budget | " + " | ".join(h for h, _, _ in columns) + " |",
             "|---|---|" + "---|" * len(columns)]
    for task, budget in budgets:
        row = [mean_sd([(current[c][key]["success"], current[c][key]["n"]) for c in cells
                        if (c.task, c.mode) == (task, mode) and c in current]) for _, mode, key in columns]
        lines.append(f"| {task} | {budget} | " + " | ".join(row) + " |")
    return lines + [""]


def plotted(current: dict[Cell, dict]) -> list[str]:
    """The tasks with a success curve to plot (crafter has none: its score is in a table)."""
    return list(dict.fromkeys(c.task for c, r in current.items()
                              if c.task != "crafter" and any(p["success"] is not None for p in r["curve"])))


def plot_links(current: dict[Cell, dict], cells: list[Cell], md_dir: Path, plot_dir: Path) -> list[str]:
    """Each grid's plots under its own table (the plots themselves: write_plots, for every task)."""
    tasks = plotted({c: r for c, r in current.items() if c in cells})
    return [f"![{t}]({os.path.relpath(plot_dir / f'results_{t}.png', md_dir)})" for t in tasks] + [""] * bool(tasks)


def write_plots(current: dict[Cell, dict], plot_dir: Path) -> None:
    """Per task: training success vs env steps at the curve's points, mean over seeds and their range."""
    plot_dir.mkdir(parents=True, exist_ok=True)
    for task in plotted(current):
        curves: dict[str, list] = {}
        for cell, r in current.items():
            pts = [p for p in r["curve"] if p["success"] is not None]
            if cell.task == task and pts:
                curves.setdefault(cell.mode, []).append((np.array([p["step"] for p in pts], dtype=float),
                                                         np.array([p["success"] for p in pts])))
        versions = ", ".join(f"{m} v{RESULTS_VERSION[m]}" for m in curves)
        report.plot(curves, plot_dir / f"results_{task}.png", f"{task}: results versions {versions}")


def crafter_lines(current: dict[Cell, dict], cells: list[Cell]) -> list[str]:
    """Our measured Crafter scores beside the published scoreboard, then our per-achievement rates."""
    lines = ["**Crafter** (all 22 achievements): score = exp(mean(log(1 + p))) - 1 over the 22 achievements' "
             "success rates p (% of the training episodes that finished within the budget).", "",
             "| agent | env steps | Crafter score | source |", "|---|---|---|---|"]
    lines += [f"| {name} | {steps} | {score} | quoted: published |" for name, steps, score in PUBLISHED]
    ours = [c for c in cells if c.task == "crafter"]
    for c in ours:
        label = f"ours: {c.mode}" + (" (reference skills, not an LLM)" if c.mode != "rl" else "")
        if c in current:
            cr = current[c]["crafter"]
            lines.append(f"| {label}, seed {c.seed} | {c.budget} | {cr['score']:.1f} ({cr['episodes']} episodes) "
                         "| measured here |")
        else:
            lines.append(f"| {label}, seed {c.seed} | {c.budget} | — | measured here: no result yet |")
    done = [c for c in ours if c in current]
    if done:
        lines += ["", "| achievement (% of episodes) | " + " | ".join(f"ours: {c.mode}" for c in done) + " |",
                  "|---|" + "---|" * len(done)]
        lines += [f"| {a} | " + " | ".join(f"{current[c]['crafter']['achievements'][a]:.1f}" for c in done) + " |"
                  for a in E.ACHIEVEMENTS]
    return lines + [""]


def missing_lines(current: dict[Cell, dict], cells: list[Cell]) -> list[str]:
    """The cells of one grid without a current result, per task and mode."""
    missing = [c for c in cells if c not in current]
    lines = [f"Missing ({len(missing)} of {len(cells)} cells):" if missing else "Missing: none."]
    for task, budget in dict.fromkeys((c.task, c.budget) for c in missing):
        per_mode = {m: " ".join(f"s{c.seed}" for c in missing if (c.task, c.mode) == (task, m))
                    for m in dict.fromkeys(c.mode for c in cells)}
        lines.append(f"- {task} ({budget}): " + "; ".join(f"{m} {s}" for m, s in per_mode.items() if s))
    return lines


def provenance(found: list[dict], current: dict[Cell, dict]) -> list[str]:
    """Which results are stale or outside both grids, where and at which commits the shown ones ran."""
    stale = [r for r in found if r["mode"] in RESULTS_VERSION and not is_current(r)]
    outside = [r for r in found if cell_of(r) not in current and r not in stale]
    lines = ["Stale, not shown (not their mode's RESULTS_VERSION): "
             + ", ".join(f"{cell_of(r).name} (v{r['results_version']})" for r in stale) + ".", ""] if stale else []
    lines += ["Not in a grid, not shown: " + ", ".join(cell_of(r).name for r in outside) + ".", ""] if outside else []
    if current:
        def count(key) -> str:
            return "; ".join(f"{k} ({n} cells)" for k, n in sorted(Counter(map(key, current.values())).items()))
        lines += ["Measured on: " + count(lambda r: f"{r['machine']['cpu']}, {r['machine']['cores']} cores"
                                            + (f", {r['machine']['gpu']}" if r["machine"].get("gpu") else "")),
                  "At commits: " + count(lambda r: r["commit"][:10] + (" (dirty)" if r["dirty"] else ""))]
    return lines


def shown(found: list[dict], cells: list[Cell]) -> dict[Cell, dict]:
    """The current results of `cells`, in grid order whatever the files' order."""
    current = {cell_of(r): r for r in found if is_current(r)}
    return {c: current[c] for c in cells if c in current}


def section(found: list[dict], cells: list[Cell], slow: list[Cell], md_dir: Path, plot_dir: Path) -> str:
    """The Markdown between the markers: every number from `found` (the result files), nothing typed."""
    current = shown(found, cells + slow)
    eval_n = sorted({r["eval"]["n"] for r in current.values()})
    versions = ", ".join(f"`{m}` v{v}" + (f" ({VERSION_NOTES[m]})" if m in VERSION_NOTES else "")
                         for m, v in RESULTS_VERSION.items())
    n_main = sum(c in current for c in cells)
    lines = [MARKERS[0], "<!-- written by `python -m bench.ablation --table` from bench/results/; not by hand -->",
             f"Current results versions (`RESULTS_VERSION` in `bench/ablation.py`, one per mode): {versions}. "
             f"{n_main} of {len(cells)} grid cells have a result. The `code`, `rlgpt`, `rlgpt-1iter` and `rl+config` "
             "cells use the hand-written reference skills and plans (`--llm library`), not an LLM.", "",
             *success_table("**Training success at the budget**: the training episodes that finished in the last "
                            "tenth of each run's env-step budget; mean ± sd over seeds (n = seeds, then the "
                            "episodes pooled over them); — = no result yet.", current, cells,
                            [(m, m, "train") for m in MODES]),
             *success_table("**Evaluation success after the last iteration** (unseen worlds"
                            + (f", {'/'.join(map(str, eval_n))} episodes per seed" if eval_n else "") + ").",
                            current, cells, [(m, m, "eval") for m in MODES])]
    lines += plot_links(current, cells, md_dir, plot_dir) + crafter_lines(current, cells)
    lines += missing_lines(current, cells) + ["", *success_table(SLOWLOOP_TITLE, current, slow, SLOWLOOP_COLUMNS)]
    lines += plot_links(current, slow, md_dir, plot_dir) + missing_lines(current, slow) + [""]
    return "\n".join(lines + provenance(found, current) + [MARKERS[1]])


def splice(text: str, new: str, path: Path) -> str:
    """`text` with its results section replaced by `new` (a file without one must get the markers by hand)."""
    if MARKERS[0] not in text or MARKERS[1] not in text:
        fail(f"{path} has no {MARKERS[0]} ... {MARKERS[1]} lines to write the table between")
    head, rest = text.split(MARKERS[0], 1)
    return head + new + rest.split(MARKERS[1], 1)[1]


def table(results: Path, md: Path, plot_dir: Path, cells: list[Cell], slow: list[Cell], check: bool) -> int:
    """Write (or with `check`, only compare) md's results section; 1 if the check finds it out of date."""
    found = load(results)
    new = section(found, cells, slow, md.parent, plot_dir)
    text = md.read_text() if md.is_file() else MARKERS[0] + MARKERS[1] + "\n"
    if check:
        if splice(text, new, md) != text:
            print(f"{md}: its results section differs from {results}/: run  python -m bench.ablation --table")
            return 1
        print(f"{md}: its results section matches the {len(found)} result files in {results}/")
        return 0
    md.write_text(splice(text, new, md))
    write_plots(shown(found, cells + slow), plot_dir)
    print(f"wrote {md}'s results section and the plots in {plot_dir}/ from {len(found)} result files")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smoke test: 1 seed, tiny budgets, under bench/out/")
    parser.add_argument("--table", action="store_true", help="no training: rewrite the results section and plots")
    parser.add_argument("--check", action="store_true", help="no training: exit 1 if the results section is stale")
    parser.add_argument("--grid", choices=("main", "slowloop"), default="main", help="the grid to run (tables: both)")
    parser.add_argument("--tasks", nargs="+", choices=[*BUDGETS, *SLOWLOOP], help="default: the grid's")
    parser.add_argument("--modes", nargs="+", choices=list(RESULTS_VERSION), help="default: the grid's")
    parser.add_argument("--seeds", nargs="+", type=int, default=list(SEEDS), choices=SEEDS)
    args = parser.parse_args(argv)
    cells, slow = grid(args.quick), slowloop_grid(args.quick)
    out = ROOT / "bench" / "out" / ("ablation-quick" if args.quick else "ablation")  # quick: apart, table too
    results, md, plot_dir = (out / "results", out / "results.md", out) if args.quick else \
        (ROOT / "bench" / "results", ROOT / "README.md", ROOT / "docs")
    if args.table or args.check:
        return max(table(results, md, plot_dir, cells, slow, check=False) if args.table else 0,
                   table(results, md, plot_dir, cells, slow, check=True) if args.check else 0)
    chosen = [c for c in (slow if args.grid == "slowloop" else cells) if c.task in (args.tasks or [c.task])
              and c.mode in (args.modes or [c.mode]) and c.seed in args.seeds]
    if not chosen:
        parser.error(f"no cell of the {args.grid} grid has that task, mode and seed (main: crafter runs rl and "
                     f"rlgpt, seed 1; slowloop: {', '.join(SLOWLOOP)} x {', '.join(SLOWLOOP_MODES)})")
    execute(chosen, out, results, (QUICK_TRAIN_ARGS if args.quick else []) + extra)
    if args.quick:
        return table(results, md, plot_dir, cells, slow, check=False)
    print("rebuild the README's table from bench/results/:  python -m bench.ablation --table")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""What the results grids are: their cells, budgets and seeds, the results version of each mode, and
reading the result files. bench/ablation.py runs cells into bench/results/; bench/results_table.py turns
the files into docs/results.md and the README's table. Both read this file; it reads neither.

Stale results: RESULTS_VERSION holds one number per mode, bumped by hand in any commit that changes what
that mode's runs measure (trainer, learner, env, skills, budgets' meaning). A result counts iff its
`results_version` is its cell's number (its mode's, unless TASK_VERSION overrides it: below); any other is
stale: listed, not shown, and its cell runs again into a fresh v<N>/ directory. v2 of `rlgpt` and
`rl+config`: "the slow loop acts" (the critic's decisions change the next iteration, a worse change is
rolled back, long tasks train their sub-tasks as a curriculum); v3: "the critic reads episode ends" (the
rule-based critic acts on how failed episodes end and, on crafter, on per-achievement evidence; a change is
kept or rolled back by the Crafter score on crafter and by efficiency once success saturates); v4 of
`rlgpt`: the reference plans give each code action its initiation (it starts only where it can), the
critic codes fighting zombies when they kill most failed episodes, and play_crafter naps early (wake_up);
v5: the critic stops shaping an item that code gathers far beyond the chain's need (the RL agent was paid
per call instead of finishing); v6 (with `rlgpt-1iter`): a call that returns without True before any step
costs no step and is masked until a step, under every plan (it was so only under follow_order, so crafter's
cells, whose plan has it, did not change: TASK_VERSION keeps them current).
`rl` and `code` runs did not change: v1 (code on crafter: v2, see TASK_VERSION). Each run's commit is
recorded for audit only.

A change that touches one task only (a task's own program, say) bumps that (mode, task) in TASK_VERSION
instead, so the mode's other cells, whose runs did not change, stay current. results_version(mode, task)
is the one place a cell's version is read: the result it writes, its run directory v<N>/, is_current and
the results page.

The modes separate the two things RL-GPT adds to PPO: `rl+config` is plain PPO with the plan's action
mask and reward shaping but no code action, so rl -> rl+config measures the plan's RL config alone and
rl+config -> rlgpt the code actions alone. The slow-loop grid measures the slow loop: `rlgpt`
(train.py's default `--iterations 3`) against `rlgpt-1iter`, i.e. `rlgpt` run with `--iterations 1` (one
plan, the critic never acts), at 300k env steps. `rlgpt-1iter` is rlgpt's control: bump both together.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

# Per mode: bump a mode's number by hand when what its runs measure changes (see the docstring).
RESULTS_VERSION = {"rl": 1, "rl+config": 3, "code": 1, "rlgpt": 6, "rlgpt-1iter": 6}
VERSION_NOTES = {"rl+config": "the critic reads episode ends",
                 "rlgpt": "code actions start only where their initiation holds; zombie deaths code fighting them; "
                          "play_crafter naps early; shaping stops where code over-gathers; a call that refuses at "
                          "once costs no step",
                 "rlgpt-1iter": "rlgpt's control"}
# Per (mode, task): overrides RESULTS_VERSION for one task's cells, for a change that only that task's runs
# see; e.g. a change to reference/crafter_program.py, run by `--mode code --task crafter` (and, taken apart, by the
# rlgpt crafter plan's parts) alone, bumps ("code", "crafter") and the crafter cells of "rlgpt" and "rlgpt-1iter"
# here, not "code" and "rlgpt", whose other cells did not change.
TASK_VERSION: dict[tuple[str, str], int] = {("code", "crafter"): 3, ("rlgpt", "crafter"): 10,
                                             ("rlgpt-1iter", "crafter"): 10}
TASK_VERSION_NOTES: dict[tuple[str, str], str] = {  # what changed, as the results page says it
    ("code", "crafter"): "reference/crafter_program.py places the furnace beside the table, where the iron tools "
                         "can be made (v2: a step away from the table could leave the furnace 3 cells from it, out "
                         "of use; v2 began the early naps, so wake_up is unlocked)",
    ("rlgpt", "crafter"): "the plan takes the whole-game routine apart: 15 of its behaviours as code actions, each with"
                          " an initiation, RL choosing among them and the base actions, and asks RL to follow its order"
                          " (follow_order: PPO is taught the first part that can act, the teacher's weight falling "
                          "linearly from 1 to a floor of 0.2, reached at 16% of the run; a part that refuses at once "
                          "costs no step, and one that fails after steps may not start at the next decision, so the "
                          "order goes on to its next part as the routine goes on to its next behaviour); each part "
                          "starts with the routine's own test for its place in that order, and places the furnace "
                          "beside the table as the routine's v3 does (v9: the teacher's weight fell to 0 over the whole"
                          " run; v8: the furnace placed as the routine's v2 did; v7: a part that failed after steps "
                          "could be called again at once, so the order retried failed placings in a loop; v6: no order "
                          "taught, looser parts; v4-v5: the routine as one code action)",
    ("rlgpt-1iter", "crafter"): "rlgpt's control"}
MODES = ("rl", "rl+config", "code", "rlgpt")
SLOWLOOP_MODES = ("rlgpt", "rlgpt-1iter")
SLOWLOOP = {"make_stone_pickaxe": 300_000, "collect_iron": 300_000, "crafter": 1_000_000}  # its tasks and budgets
QUICK_SLOWLOOP = {"make_stone_pickaxe": 2_500, "collect_iron": 2_500, "crafter": 5_000}
SLOWLOOP_BASELINE = "code"  # the code arm beside each slow-loop pair: what RL-GPT must not fall below
SEEDS = (1, 2, 3)
BUDGETS = {"collect_wood": 50_000, "place_table": 100_000, "make_wood_pickaxe": 200_000,
           "collect_stone": 300_000, "crafter": 1_000_000}
# crafter (1M env steps, ~40 min a cell here): rl, the whole-benchmark program (`code`) and rlgpt over every seed.
CRAFTER_MODES = {"rl": SEEDS, "code": SEEDS, "rlgpt": SEEDS}
# --quick is a smoke test of the pipeline (RL barely starts); its results never enter bench/results/.
QUICK_BUDGETS = {"collect_wood": 2_000, "place_table": 2_000, "make_wood_pickaxe": 2_500,
                 "collect_stone": 2_500, "crafter": 5_000}
# The aims (not claims), shown beside what was measured: (task, mode, what, at least).
# what: "train" (training success at the budget, a fraction), "score" (Crafter's score) or an achievement
# (% of crafter's training episodes that unlocked it).
TARGETS = [("collect_wood", "rlgpt", "train", 0.95), ("make_wood_pickaxe", "rlgpt", "train", 0.90),
           ("crafter", "rlgpt", "score", 30.0), ("crafter", "rlgpt", "make_iron_pickaxe", 10.0),
           ("crafter", "rlgpt", "collect_diamond", 5.0), ("crafter", "rlgpt", "collect_diamond", 12.0)]
# RL-GPT against its ablations on every task of the main grid but crafter: rlgpt's mean training success at
# the budget at least the other arm's plus the margin. And on crafter, nothing PPO learns is lost: every
# achievement `rl` unlocks in more than KEPT[0] of its episodes, rlgpt unlocks at least KEPT[1] times as often.
COMPARISONS = [("code", -0.02), ("rl+config", 0.0)]
# And beyond the main grid's short tasks: (task, the other arm, measure as in TARGETS, margin, strictly above):
# rlgpt against the code arm on the long chains and on crafter, and against rlgpt-1iter on crafter (the slow
# loop helps), each by its mean over the seeds run.
LONG_COMPARISONS = [("make_stone_pickaxe", "code", "train", -0.02, False),
                    ("collect_iron", "code", "train", -0.02, False),
                    ("crafter", "code", "score", 0.0, False), ("crafter", "rlgpt-1iter", "score", 0.0, True)]
KEPT = (0.5, 0.8)


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


def curve_key(task: str) -> str:
    """What a result's curve points hold: the success rate, or for crafter the achievements unlocked per episode."""
    return "achievements" if task == "crafter" else "success"


def grid(quick: bool = False) -> list[Cell]:
    """Cheap tasks first, all modes of a seed together, so a long ablation has a complete small table
    early; crafter (CRAFTER_MODES, each over its own seeds) last."""
    budgets = QUICK_BUDGETS if quick else BUDGETS
    modes = {task: CRAFTER_MODES if task == "crafter" else dict.fromkeys(MODES, SEEDS) for task in budgets}
    return [Cell(task, mode, seed, budget) for task, budget in budgets.items()
            for seed in (SEEDS[:1] if quick else SEEDS)
            for mode, seeds in modes[task].items() if seed in seeds]


def slowloop_grid(quick: bool = False) -> list[Cell]:
    """Both modes of a seed together, then the code arm's cell of that seed (crafter's is the main grid's), so
    the comparison is complete seed by seed."""
    return [Cell(task, mode, seed, budget) for task, budget in (QUICK_SLOWLOOP if quick else SLOWLOOP).items()
            for seed in (SEEDS[:1] if quick else SEEDS) for mode in (*SLOWLOOP_MODES, SLOWLOOP_BASELINE)]


def results_version(mode: str, task: str) -> int:
    """The version a (mode, task) cell's results are measured at: its TASK_VERSION override if it has one,
    else its mode's RESULTS_VERSION, so a change seen by one task's runs re-runs that task's cells only."""
    return TASK_VERSION.get((mode, task), RESULTS_VERSION[mode])


def is_current(r: dict) -> bool:
    """A result counts iff it was measured at its cell's version (a mode no longer run never counts)."""
    return r.get("mode") in RESULTS_VERSION and r.get("results_version") == results_version(r["mode"], r["task"])


def fail(message: str) -> NoReturn:
    """Bad input: a sentence on stderr and exit status 2, no traceback."""
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)


def read_result(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        fail(f"{path} is not a readable result file ({e}); fix or delete it")


def load(results: Path) -> list[dict]:
    return [read_result(p) for p in sorted(results.glob("*.json"))]


def cell_of(r: dict) -> Cell:
    return Cell(r["task"], r["mode"], r["seed"], r["budget"])


def shown(found: list[dict], cells: list[Cell]) -> dict[Cell, dict]:
    """The current results of `cells`, in grid order whatever the files' order."""
    current = {cell_of(r): r for r in found if is_current(r)}
    return {c: current[c] for c in cells if c in current}

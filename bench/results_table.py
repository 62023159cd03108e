"""bench/results/ -> the results page (docs/results.md), the README's headline table and the plots, from the
result files alone: the grids' success tables (mean ± sd over seeds, with episode counts), Crafter's score
beside the published scoreboard and its runs' mean episode length per iteration, the issue's targets beside
what was measured (their rows: bench/targets.py), the cells still missing, and where and at which commits the
shown results ran.
Every number comes from a result file; none is typed. Run through `python -m bench.ablation --table` / `--check`.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import numpy as np

import env
import report
from bench.backends import LLM_DIR, backend_lines, backend_results, backend_rows
from bench.grid import (
    MODES,
    RESULTS_VERSION,
    SLOWLOOP_MODES,
    TASK_VERSION,
    TASK_VERSION_NOTES,
    VERSION_NOTES,
    Cell,
    cell_of,
    curve_key,
    fail,
    is_current,
    load,
    results_version,
    shown,
)
from bench.targets import length_text, mean_sd, target_lines

SLOWLOOP_TITLE = ("**With and without the slow loop** (`--grid slowloop`): `rlgpt` (`--iterations 3`: the critic's "
                  "decisions change the next iteration) against `rlgpt-1iter` (`rlgpt` with `--iterations 1`: one "
                  "plan, the critic never acts); training success at the budget and evaluation success as above. "
                  "Read the training columns: hundreds of episodes, both modes' worlds drawn from the same training "
                  "stream. The evaluation columns are 8 episodes per seed on different worlds for the two modes "
                  "(each iteration evaluates on its own unseen worlds, and the last evaluation is iteration 3's "
                  "for `rlgpt`, iteration 1's for `rlgpt-1iter`). Beside them the code arm (`code`: the "
                  "whole-task program, no RL), which RL-GPT should not fall below.")
SLOWLOOP_COLUMNS = [(f"{what}: {label}", mode, key) for key, what in (("train", "training"), ("eval", "evaluation"))
                    for mode, label in (("rlgpt", "with (`rlgpt`)"), ("rlgpt-1iter", "without (`rlgpt-1iter`)"),
                                        ("code", "code arm (`code`)"))]
# Quoted, not measured: ../shared/paper-notes.md (Crafter's scoreboard): (agent, env steps, score).
PUBLISHED = [("random", "-", 1.6), ("SB3 PPO", "1M", 4.6), ("DreamerV3", "1M", 14.5),
             ("PPO-ResNet", "1M", 15.6), ("Achievement Distillation", "1M", 21.8),
             ("SPRING (GPT-4, no training)", "-", 27.3), ("human experts", "-", 50.5)]
# What each crafter cell plays, so nobody takes one arm's plan for the other's.
CRAFTER_PLANS = ("On crafter, `code` is the whole-game routine (reference/crafter_program.py, one code action called "
                 "on every decision) and `rlgpt` is that routine taken apart: 15 of its behaviours as code actions, "
                 "each with an initiation, and PPO choosing among them and its base actions, taught the "
                 "parts' order by a loss whose weight falls linearly from 1 to 0.2 by 16% of the run and stays "
                 "there (reference/crafter_parts.py; the plan's follow_order).")
MARKERS = ("<!-- results:start -->", "<!-- results:end -->")  # the results page's generated section
HEADLINE = ("<!-- headline:start -->", "<!-- headline:end -->")  # the README's small table
GENERATED = "<!-- written by `python -m bench.ablation --table` from bench/results/; not by hand -->"

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
    """The tasks with a curve to plot."""
    return list(dict.fromkeys(c.task for c, r in current.items()
                              if any(p[curve_key(c.task)] is not None for p in r["curve"])))


def plot_links(current: dict[Cell, dict], cells: list[Cell], md_dir: Path, plot_dir: Path) -> list[str]:
    """Each grid's plots under its own table (the plots themselves: write_plots, for every task)."""
    tasks = plotted({c: r for c, r in current.items() if c in cells})
    return [f"![{t}]({os.path.relpath(plot_dir / f'results_{t}.png', md_dir)})" for t in tasks] + [""] * bool(tasks)


def write_plots(current: dict[Cell, dict], plot_dir: Path) -> None:
    """Per task: training success (crafter: achievements unlocked per episode) vs env steps at the curve's
    points, mean over seeds and their range."""
    plot_dir.mkdir(parents=True, exist_ok=True)
    for task in plotted(current):
        curves: dict[str, list] = {}
        key = curve_key(task)
        for cell, r in current.items():
            pts = [p for p in r["curve"] if cell.task == task and p[key] is not None]
            if pts:
                curves.setdefault(cell.mode, []).append((np.array([p["step"] for p in pts], dtype=float),
                                                         np.array([p[key] for p in pts])))
        versions = ", ".join(f"{m} v{results_version(m, task)}" for m in curves)
        per_episode = {"ylabel": "achievements unlocked per training episode (of 22)", "rate": False}
        report.plot(curves, plot_dir / f"results_{task}.png", f"{task}: results versions {versions}",
                    **(per_episode if key == "achievements" else {}))


def crafter_lines(current: dict[Cell, dict], cells: list[Cell]) -> list[str]:
    """Our measured Crafter scores beside the published scoreboard, then our per-achievement rates."""
    lines = ["**Crafter** (all 22 achievements): score = exp(mean(log(1 + p))) - 1 over the 22 achievements' "
             "success rates p (% of the training episodes that finished within the budget). " + CRAFTER_PLANS, "",
             "| agent | env steps | Crafter score | source |", "|---|---|---|---|"]
    lines += [f"| {name} | {steps} | {score} | quoted: published |" for name, steps, score in PUBLISHED]
    ours = [c for c in cells if c.task == "crafter"]
    for c in ours:
        plays = {"code": ", the whole-game routine", "rlgpt": ", the routine's parts",
                 "rlgpt-1iter": ", the routine's parts"}.get(c.mode, "")
        label = f"ours: {c.mode}" + (f" (reference skills{plays}, not an LLM)" if c.mode != "rl" else "")
        if c in current:
            cr = current[c]["crafter"]
            lines.append(f"| {label}, seed {c.seed} | {c.budget} | {cr['score']:.1f} ({cr['episodes']} episodes) "
                         "| measured here |")
        else:
            lines.append(f"| {label}, seed {c.seed} | {c.budget} | — | measured here: no result yet |")
    rates: dict[str, list[dict]] = {}  # per mode, each seed's rates: one column a mode, its mean over seeds
    for c in ours:
        if c in current:
            rates.setdefault(c.mode, []).append(current[c]["crafter"]["achievements"])
    if rates:
        lines += ["", "| achievement (% of episodes, mean over seeds) | "
                  + " | ".join(f"ours: {m} (n={len(r)})" for m, r in rates.items()) + " |",
                  "|---|" + "---|" * len(rates)]
        lines += [f"| {a} | " + " | ".join(f"{np.mean([seed[a] for seed in r]):.1f}" for r in rates.values()) + " |"
                  for a in env.ACHIEVEMENTS]
    return lines + [""]


def length_lines(current: dict[Cell, dict], cells: list[Cell]) -> list[str]:
    """Crafter's runs, one row each: per iteration the mean length of the training episodes that finished
    in it, with their n, after their Crafter score where the result file keeps it. An episode of the whole
    benchmark ends at death or the time limit, so the length is survival, which the score alone does not
    show. "—" where the result file predates the field."""
    runs = [(c, its) for c in cells if c.task == "crafter" and (its := current.get(c, {}).get("iterations"))]
    if not runs:
        return []
    k = max(len(its) for _, its in runs)

    def cell(it: dict) -> str:
        got, score = it.get("episode_length") or {"mean": None}, it.get("score")
        length = "—" if got["mean"] is None else f"{got['mean']:.1f} (n={got['n']})"
        return f"{score['score']:.1f} ± {score['se']:.1f}; {length}" if score else length

    return ["**Mean episode length per iteration** (crafter; training episodes, n): the mean length in env "
            "steps of the training episodes that finished in the iteration, and their count n, after the "
            "Crafter score of those episodes ± its bootstrap standard error where the result file keeps it; "
            "— = the result file was written before results kept the length.", "",
            "| run | " + " | ".join(f"iteration {i}" for i in range(1, k + 1)) + " |", "|---|" + "---|" * k,
            *(f"| {c.mode}, seed {c.seed} | " + " | ".join([*map(cell, its), *[""] * (k - len(its))]) + " |"
              for c, its in runs), ""]


def pair_lines(current: dict[Cell, dict], slow: list[Cell]) -> list[str]:
    """Per task and seed with both results: training success with the slow loop against without, and which
    side is higher, so the mean's spread can be read seed by seed."""
    lines = []
    for task in dict.fromkeys(c.task for c in slow):
        pairs = []
        for seed in sorted({c.seed for c in slow if c.task == task}):
            with_, without = (next((current[c]["train"]["success"] for c in slow if c in current
                                    and (c.task, c.mode, c.seed) == (task, m, seed)), None) for m in SLOWLOOP_MODES)
            if with_ is not None and without is not None:
                pairs.append((seed, with_, without))
        if pairs:
            higher = sum(w > wo for _, w, wo in pairs)
            lines.append(f"- {task}: " + "; ".join(f"s{s} {w:.3f} vs {wo:.3f}" for s, w, wo in pairs)
                         + f" (with the loop higher in {higher} of {len(pairs)} seeds)")
    return ["Training success per seed, with the slow loop vs without:", *lines, ""] if lines else []


def score_lines(current: dict[Cell, dict], cells: list[Cell]) -> list[str]:
    """crafter's slow loop: each mode's Crafter score, mean ± sd over its seeds with results, the code arm beside."""
    found = {m: [(current[c]["crafter"]["score"], current[c]["crafter"]["episodes"]) for c in cells
                 if c.mode == m and c in current] for m in dict.fromkeys(c.mode for c in cells)}
    if not any(found.values()):
        return []
    return ["Crafter score on `crafter` (1M env steps): " + "; ".join(f"`{m}` {mean_sd(v)}" for m, v in found.items())
            + ".", ""]


def loop_lines(current: dict[Cell, dict], slow: list[Cell]) -> list[str]:
    """What the slow loop did in each `rlgpt` run of the slow-loop grid, from its result file: per iteration
    the training success, then the critic's decisions and whether the next iteration kept them."""
    lines = []
    for c in slow:
        its = current[c].get("iterations", []) if c in current and c.mode == "rlgpt" else []
        if not its or "train" not in its[0]:
            continue  # a result file from before the iterations kept their success
        steps = []
        for it in its:
            got = it["train"]
            done = f"iteration {it['iteration']}: {got['success']:.2f} (n={got['n']}{length_text(it)})"
            if it.get("change"):
                done += f", the change {it['change'].split(':')[0]}"
            steps.append(done)
            if it is not its[-1]:  # after a rollback the critic is not asked: the restored plan trains again
                steps.append("decided: " + "; ".join(it["decided"]) if it.get("decided") else
                             "the previous plan trains again" if (it.get("change") or "").startswith("rolled back")
                             else "no change decided")
        lines.append(f"- {c.name}: " + " -> ".join(steps))
    if not lines:
        return []
    return ["What the slow loop did in each `rlgpt` run above (from its result file: the training success of "
            "each iteration's finished episodes and, where the result keeps it, their mean length in env steps, "
            "the rule-based critic's decisions, and whether the next iteration kept them or rolled them back):",
            *lines, ""]


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
    lines = ["Stale, not shown (not their cell's results version): "
             + ", ".join(f"{cell_of(r).name} (v{r['results_version']})" for r in stale) + ".", ""] if stale else []
    lines += ["Not in a grid, not shown: " + ", ".join(cell_of(r).name for r in outside) + ".", ""] if outside else []
    if current:
        def count(key) -> str:
            counts = sorted(Counter(map(key, current.values())).items())
            return "; ".join(f"{k} ({n} cell{'s' * (n != 1)})" for k, n in counts)
        lines += ["Measured on: " + count(lambda r: f"{r['machine']['cpu']}, {r['machine']['cores']} cores"
                                            + (f", {r['machine']['gpu']}" if r["machine"].get("gpu") else "")),
                  "At commits: " + count(lambda r: r["commit"][:10] + (" (dirty)" if r["dirty"] else ""))]
    return lines


def section(found: list[dict], cells: list[Cell], slow: list[Cell], md_dir: Path, plot_dir: Path,
            backends: dict[str, list[dict]] | None = None) -> str:
    """The Markdown between the markers: every number from `found` (the result files) and `backends` (each LLM
    backend's, by folder), nothing typed."""
    current = shown(found, cells + slow)
    eval_n = sorted({r["eval"]["n"] for r in current.values()})
    versions = ", ".join(f"`{m}` v{v}" + (f" ({VERSION_NOTES[m]})" if m in VERSION_NOTES else "")
                         for m, v in RESULTS_VERSION.items())
    overrides = ", ".join(f"`{m}` on {t} v{v}" + (f" ({TASK_VERSION_NOTES[m, t]})" if (m, t) in TASK_VERSION_NOTES
                                                   else "") for (m, t), v in TASK_VERSION.items())
    if overrides:
        versions += f"; one task's cells of a mode, overridden by `TASK_VERSION` (a change only they see): {overrides}"
    n_main = sum(c in current for c in cells)
    lines = [MARKERS[0], GENERATED,
             f"Current results versions (`RESULTS_VERSION` in `bench/grid.py`, one per mode): {versions}. "
             f"{n_main} of {len(cells)} grid cells have a result. The `code`, `rlgpt`, `rlgpt-1iter` and `rl+config` "
             "cells use the hand-written reference skills and plans (`--llm reference`), not an LLM.", "",
             *success_table("**Training success at the budget**: the training episodes that finished in the last "
                            "tenth of each run's env-step budget; mean ± sd over seeds (n = seeds, then the "
                            "episodes pooled over them); — = no result yet.", current, cells,
                            [(m, m, "train") for m in MODES]),
             *success_table("**Evaluation success after the last iteration** (unseen worlds"
                            + (f", {'/'.join(map(str, eval_n))} episodes per seed" if eval_n else "") + ").",
                            current, cells, [(m, m, "eval") for m in MODES])]
    short, crafter = [c for c in cells if c.task != "crafter"], [c for c in cells if c.task == "crafter"]
    lines += plot_links(current, short, md_dir, plot_dir) + backend_lines(backends or {}, cells + slow)
    lines += crafter_lines(current, cells) + length_lines(current, cells)
    lines += plot_links(current, crafter, md_dir, plot_dir) + target_lines(current, list(dict.fromkeys(cells + slow)))
    slow_short = [c for c in slow if c.task != "crafter"]  # crafter's slow loop is read by its score, below
    lines += missing_lines(current, cells) + ["", *success_table(SLOWLOOP_TITLE, current, slow, SLOWLOOP_COLUMNS)]
    lines += plot_links(current, slow_short, md_dir, plot_dir) + pair_lines(current, slow_short)
    lines += loop_lines(current, slow_short) + score_lines(current, [c for c in slow if c.task == "crafter"])
    lines += missing_lines(current, slow)
    lines += [""]
    return "\n".join(lines + provenance(found, current) + [MARKERS[1]])


def headline(found: list[dict], cells: list[Cell], results_page: str,
             backends: dict[str, list[dict]] | None = None) -> str:
    """The README's table between HEADLINE: training success per task and mode, and Crafter's score per mode,
    each mean ± sd over the seeds with a result, then the same rows of each LLM backend (`backends`) with
    their cells' mean calls and tokens; the rest of the numbers are on `results_page`."""
    current = shown(found, cells)
    short = [c for c in cells if c.task != "crafter"]
    crafter = [c for c in cells if c.task == "crafter"]
    modes = [m for m in MODES if any(c.mode == m for c in cells)]
    table = success_table(f"{sum(c in current for c in cells)} of {len(cells)} grid cells have a result. **Training "
                          "success at the budget** (the training episodes that finished in the last tenth of the "
                          "budget; mean ± sd over seeds, n = seeds, then the episodes pooled; — = no result yet):",
                          current, short, [(m, m, "train") for m in modes])[:-1]
    if crafter:
        scores = [mean_sd([(current[c]["crafter"]["score"], current[c]["crafter"]["episodes"]) for c in crafter
                           if c.mode == m and c in current]) if any(c.mode == m for c in crafter) else "not run"
                  for m in modes]
        table.append(f"| crafter: Crafter score | {crafter[0].budget} | " + " | ".join(scores) + " |")
    rows = backend_rows(backends or {}, cells, modes)
    table += rows
    if rows:
        table += ["", "Rows `..., model M` ran with that model (`python -m bench.ablation --llm http`); beside each "
                  "result, its cells' mean LLM calls (failed ones included) and tokens (prompt + completion, the "
                  "server's counts). `rl` asks no LLM: its row is the reference's."]
    published = ", ".join(f"{name} {score}" for name, steps, score in PUBLISHED if steps == "1M")
    return "\n".join([HEADLINE[0], GENERATED, *table, "",
                      f"All modes but `rl` use the hand-written reference skills and plans (`--llm reference`), not "
                      f"an LLM. {CRAFTER_PLANS} Published Crafter scores at 1M env steps, quoted for scale: "
                      f"{published}. "
                      f"Evaluation, plots, targets, per-seed lines and the slow-loop grid: [{results_page}]"
                      f"({results_page}).", HEADLINE[1]])


def splice(text: str, new: str, path: Path, markers: tuple[str, str] = MARKERS) -> str:
    """`text` with its section between `markers` replaced by `new` (a file without them must get them by hand)."""
    if markers[0] not in text or markers[1] not in text:
        fail(f"{path} has no {markers[0]} ... {markers[1]} lines to write the table between")
    head, rest = text.split(markers[0], 1)
    return head + new + rest.split(markers[1], 1)[1]


def table(results: Path, md: Path, plot_dir: Path, cells: list[Cell], slow: list[Cell], check: bool,
          readme: Path | None = None) -> int:
    """Write (or with `check`, only compare) md's results section and, given `readme`, its headline table;
    1 if the check finds either out of date."""
    found = load(results)
    backends = {os.path.relpath(results / LLM_DIR / folder, md.parent.parent): rs
                for folder, rs in backend_results(results).items()}
    text = md.read_text() if md.is_file() else MARKERS[0] + MARKERS[1] + "\n"
    pages = [(md, text, splice(text, section(found, cells, slow, md.parent, plot_dir, backends), md))]
    if readme is not None:
        link = os.path.relpath(md, readme.parent)
        text = readme.read_text() if readme.is_file() else ""
        pages.append((readme, text, splice(text, headline(found, cells, link, backends), readme, HEADLINE)))
    if check:
        stale = [path for path, text, new in pages if new != text]
        for path in stale:
            print(f"{path}: its generated results section differs from {results}/: run  "
                  "python -m bench.ablation --table")
        if not stale:
            print(f"{' and '.join(str(p) for p, _, _ in pages)}: the generated results match the {len(found)} "
                  f"result files in {results}/")
        return int(bool(stale))
    for path, _, new in pages:
        path.write_text(new)
    write_plots(shown(found, cells + slow), plot_dir)
    print(f"wrote the results in {' and '.join(str(p) for p, _, _ in pages)} and the plots in {plot_dir}/ "
          f"from {len(found)} result files")
    return 0

"""The results issue's targets beside what was measured (bench/grid.py: TARGETS, COMPARISONS, KEPT), and for a
missed one what its runs' own logs say; with the two formatters every table of the results page shares (a mean
with its spread and counts, an iteration's episode length). bench/results_table.py puts these rows on the page.
"""

from __future__ import annotations

import numpy as np

import env
from bench.grid import BUDGETS, COMPARISONS, KEPT, LONG_COMPARISONS, TARGETS, Cell, curve_key


def mean_sd(values: list[tuple[float | None, int]]) -> str:
    """"mean ± sd (n=seeds, episodes pooled)" over the seeds that have a value (sd: ddof=1); "—" if none."""
    vals = [(v, n) for v, n in values if v is not None]
    if not vals:
        return "—"
    x, eps = np.array([v for v, _ in vals]), sum(n for _, n in vals)
    spread = f" ± {x.std(ddof=1):.2f}" if len(x) > 1 else ""
    return f"{x.mean():.2f}{spread} (n={len(x)}, {eps} ep)"


def length_text(it: dict) -> str:
    """"; mean length M steps, n=N": the mean length of the training episodes that finished in the iteration,
    beside its success, so survival (crafter) or speed (a single goal) can be read too; "" for a result file
    written before results kept it."""
    got = it.get("episode_length")
    if got is None:
        return ""
    mean = "—" if got["mean"] is None else f"{got['mean']:.1f} steps"
    return f"; mean length {mean}, n={got['n']}"


def measured(r: dict, what: str) -> float | None:
    """One result's value of a target's measure (TARGETS): training success, Crafter's score or an
    achievement's rate."""
    if what == "train":
        return r["train"]["success"]
    return r["crafter"]["score"] if what == "score" else r["crafter"]["achievements"][what]


def target_lines(current: dict[Cell, dict], cells: list[Cell]) -> list[str]:
    """Each target beside its measurement (mean over the seeds run) and, for a missed one, what its runs'
    own logs say: the curve's best point against its last, and the last iteration's weakest code actions."""
    lines = ["**Targets** (the results issue's aims, not claims): met when the mean over the seeds run reaches "
             "the aim; a row setting two arms against each other takes the seeds both have run.", "",
             "| task, mode | measure | aim | measured | status |", "|---|---|---|---|---|"]
    evidence = []
    for task, mode, what, aim in TARGETS:
        ran = [(c, current[c]) for c in cells if (c.task, c.mode) == (task, mode) and c in current]
        planned = sum((c.task, c.mode) == (task, mode) for c in cells)
        label = ("training success at the budget" if what == "train" else "Crafter score" if what == "score"
                 else f"{what} (% of episodes)")
        values = [(measured(r, what), r["train"]["n"] if what == "train" else r["crafter"]["episodes"])
                  for _, r in ran]
        known = [v for v, _ in values if v is not None]
        status = ("not measured yet" if not known else ("met" if np.mean(known) >= aim else "missed")
                  + (f" ({len(ran)} of {planned} seeds run)" if len(ran) < planned else ""))
        lines.append(f"| {task}, {mode} | {label} | {aim:g} | {mean_sd(values)} | {status} |")
        if status.startswith("missed"):  # a run missing two targets (crafter's) is described once
            evidence += [line for c, r in ran if (line := f"- {c.name}: {why_missed(r)}") not in evidence]
    lines += comparison_lines(current, cells)
    if evidence:
        lines += ["", "From the missed targets' own logs (the curve; training success per iteration and, where "
                      "the result keeps it, the mean length in env steps of the training episodes that finished "
                      "in it, each with its n; the last iteration's weakest code actions, by the share of calls "
                      "that returned True; the last critic summary):", *evidence]
    return lines + [""]


def comparison_lines(current: dict[Cell, dict], cells: list[Cell]) -> list[str]:
    """The target rows of RL-GPT against its ablations (COMPARISONS, KEPT): each pair of arms over the seeds both
    have run, so a comparison never sets one seed of an arm against three of the other."""
    def runs(task: str, mode: str, seeds: set[int] | None = None) -> list[dict]:  # the result files of the seeds run
        return [current[c] for c in cells if (c.task, c.mode) == (task, mode) and c in current
                and (seeds is None or c.seed in seeds)]

    def mean(task: str, mode: str, what: str = "train", seeds: set[int] | None = None) -> float | None:
        known = [v for r in runs(task, mode, seeds) if (v := measured(r, what)) is not None]
        return float(np.mean(known)) if known else None

    def paired(task: str, other: str, what: str = "train") -> tuple[float | None, float | None, str]:
        """rlgpt's and `other`'s means over the seeds both ran, and the text shown for them."""
        seeds = [{c.seed for c in cells if (c.task, c.mode) == (task, m) and c in current} for m in ("rlgpt", other)]
        planned = len({c.seed for c in cells if c.task == task and c.mode in ("rlgpt", other)})
        both = seeds[0] & seeds[1]
        a, b = mean(task, "rlgpt", what, both), mean(task, other, what, both)
        shown = "—" if a is None or b is None else f"{a:.2f} vs {b:.2f}" + (
            f" ({len(both)} of {planned} seeds run by both)" if len(both) < planned else "")
        return a, b, shown

    rows = []
    for task in [t for t in BUDGETS if t != "crafter"]:
        for other, margin in COMPARISONS:
            a, b, got = paired(task, other)
            aim = f">= {other}" + (f" {margin:+g}" if margin else "")
            ok = None if a is None or b is None else a >= b + margin - 1e-9
            rows.append(f"| {task}, rlgpt | training success at the budget, against `{other}` | {aim} | {got} | "
                        f"{'not measured yet' if ok is None else 'met' if ok else 'missed'} |")
    for task, other, what, margin, strict in LONG_COMPARISONS:
        a, b, got = paired(task, other, what)
        aim = (">" if strict else ">=") + f" {other}" + (f" {margin:+g}" if margin else "")
        ok = None if a is None or b is None else a > b + margin if strict else a >= b + margin - 1e-9
        label = "training success at the budget" if what == "train" else "Crafter score"
        status = "not measured yet" if ok is None else "met" if ok else "missed"
        if ok is not None and other == "rlgpt-1iter":  # the slow loop's row: did the critic change anything?
            ran = runs(task, "rlgpt")
            if not any(it.get("decided") for r in ran for it in r.get("iterations", [])):
                status += (f" in number only: the critic decided no change in any iteration of the {len(ran)} "
                           "`rlgpt` runs, so both arms ran one plan and differ by noise")
        rows.append(f"| {task}, rlgpt | {label}, against `{other}` | {aim} | {got} | {status} |")
    learned = [a for a in env.ACHIEVEMENTS if (p := mean("crafter", "rl", a)) is not None and p > 100 * KEPT[0]]
    ratios = {a: (mean("crafter", "rlgpt", a), mean("crafter", "rl", a)) for a in learned}
    if ratios and all(r is not None for r, _ in ratios.values()):
        low, (r, p) = min(ratios.items(), key=lambda kv: kv[1][0] / kv[1][1])
        rows.append(f"| crafter, rlgpt | each of the {len(learned)} achievements `rl` unlocks in > "
                    f"{100 * KEPT[0]:g}% of its episodes, against `rl`'s rate | >= {KEPT[1]:g}x | lowest: {low} "
                    f"{r:.1f}% vs {p:.1f}% ({r / p:.2f}x) | {'met' if r >= KEPT[1] * p else 'missed'} |")
    return rows


def iteration_text(prev: dict | None, it: dict) -> str:
    """An iteration's training success or, with no single goal, its Crafter score (and mean episode length),
    and what the critic's decisions after the previous one became."""
    score = it.get("score")  # no single goal (crafter): its Crafter score, where the result file keeps it
    shown = (f"{score['score']:.2f} +- {score['se']:.2f} (n={score['episodes']}{length_text(it)}" if score else
             f"{it['train']['success']:.2f} (n={it['train']['n']}{length_text(it)}")
    if prev is None:
        return shown + ")"
    if not prev.get("decided"):
        return shown + "; no change decided before it)"
    return shown + (f"; the change {it['change'].split(':')[0]})" if it.get("change") else ")")


def why_missed(r: dict) -> str:
    """One line from a result file: where its curve peaked and ended, and what its code actions did."""
    key = curve_key(r["task"])
    pts = [p for p in r["curve"] if p.get(key) is not None]
    text = ""
    if pts:
        best = max(pts, key=lambda p: p[key])
        unit = " (achievements unlocked per episode)" if key == "achievements" else ""
        text = f"curve{unit} peaked at {best[key]:.2f} (env step {best['step']}), ended at {pts[-1][key]:.2f}"
    its = [it for it in r.get("iterations", []) if it.get("train")]
    if its:
        goal = env.get_task(r["task"]).success  # {}: no single goal, so no episode counts as a success
        what = ("training success" if goal else "Crafter score of the training episodes" if its[0].get("score")
                else "training success (none can succeed: this task has no single goal; the result file was "
                "written before results kept each iteration's Crafter score)")
        text += f"; {what} per iteration: " + ", ".join(
            iteration_text(prev, it) for prev, it in zip([None, *its[:-1]], its, strict=True))
    last = r["iterations"][-1] if r.get("iterations") else {}
    weakest = sorted(last.get("code_actions", {}).items(), key=lambda kv: kv[1]["success_rate"])[:2]
    if weakest:
        text += f"; iteration {last['iteration']}: " + ", ".join(
            f"{name} {row['success_rate']:.2f} of {row['chosen']} calls"
            + (f", {row['ends']['false_at_once']} returned at once without a step" if row.get("ends") else "")
            + (f" (commonest error: {row['error']})" if row.get("error") else "") for name, row in weakest)
    said = next((it["critic"] for it in reversed(r.get("iterations", [])) if it.get("critic")), None)
    cut = " ..." if said and len(said) >= 300 else ""  # result files keep the first 300 characters
    return text + (f"; critic: \"{said}{cut}\"" if said else "")

"""bench/results_table.py through `python -m bench.ablation --table` / `--check`: the results page and the
README's table written from fake result files (and from result_of on fake run directories), so every
number on the page is traced to a result file. The fake runs and results: tests/test_ablation.py."""

import json

import pytest

import env
from bench import ablation, grid
from tests.test_ablation import fake_result, fake_run, pages, row_of


def test_table_shows_mean_spread_and_counts_lists_missing_and_stale_cells(tmp_path, monkeypatch):
    monkeypatch.setattr(ablation, "ROOT", tmp_path)
    md, results = pages(tmp_path), tmp_path / "bench" / "results"
    known = {"rl": [(0.2, 10), (0.4, 20), (0.9, 30)], "rlgpt": [(0.7, 5), (0.8, 5), (0.9, 5)]}  # seeds 1-3
    wood = {c: known[c.mode][c.seed - 1] for c in grid.grid() if c.task == "collect_wood" and c.mode in known}
    for c, (s, n) in wood.items():
        fake_result(results, c, s, n)
    empty_window = grid.Cell("place_table", "code", 1, 100_000)
    fake_result(results, empty_window, None, 0)
    fake_result(results, grid.Cell("place_table", "rl", 2, 100_000), 0.5, 10, version=grid.RESULTS_VERSION["rl"] + 1)
    rates = dict.fromkeys(env.ACHIEVEMENTS, 0.0) | {"collect_wood": 90.0}
    fake_result(results, grid.Cell("crafter", "rlgpt", 1, 1_000_000), None, 0,
                crafter={"score": 1.234, "episodes": 77, "achievements": rates})
    assert ablation.main(["--table"]) == 0
    text = md.read_text()
    assert text.startswith("# Results\n\nbefore\n\n<!-- results:start -->") and text.endswith("-->\n\nafter\n")
    assert "STALE-SECTION" not in text
    # rl: mean 0.5, sd sqrt((0.3^2 + 0.1^2 + 0.4^2) / 2) = 0.36, 60 episodes; rlgpt: mean 0.8, sd 0.1, 15
    train, _ = row_of(text, "collect_wood", "50000")
    assert train[2 + grid.MODES.index("rl")] == "0.50 ± 0.36 (n=3, 60 ep)"
    assert train[2 + grid.MODES.index("rlgpt")] == "0.80 ± 0.10 (n=3, 15 ep)"
    assert row_of(text, "collect_wood", "50000")[0][3] == "—"  # rl+config: no result
    assert row_of(text, "place_table", "100000")[0][4] == "—"  # a window without episodes
    assert "- collect_wood (50000): rl+config s1 s2 s3; code s1 s2 s3\n" in text
    assert "- place_table (100000): rl s1 s2 s3; rl+config s1 s2 s3; code s2 s3; rlgpt s1 s2 s3\n" in text
    assert "- crafter (1000000): rl s1 s2 s3; code s1 s2 s3; rlgpt s2 s3\n" in text
    assert f"Missing ({57 - 8} of 57 cells):" in text
    assert f"place_table__rl__s2__100000 (v{grid.RESULTS_VERSION['rl'] + 1})" in text.split("Stale")[1]
    assert row_of(text, "ours: rlgpt (reference skills, the routine's parts, not an LLM), seed 1")[0][1:] == [
        "1000000", "1.2 (77 episodes)", "measured here"]
    assert "| ours: rl, seed 1 | 1000000 | — | measured here: no result yet |" in text
    assert "| human experts | - | 50.5 | quoted: published |" in text and text.count("quoted: published") == 7
    assert "| collect_wood | 90.0 |" in text and len(row_of(text, "0.0")) == 21
    assert "![collect_wood](results_collect_wood.png)" in text and "results_place_table" not in text  # no curve
    assert (tmp_path / "docs" / "results_collect_wood.png").stat().st_size > 1000
    assert "results_crafter" not in text  # its curve has no episode yet


def test_crafter_curve_is_plotted_under_its_scores_on_its_own_scale(tmp_path, monkeypatch):
    """From result files as result_of writes them for crafter (curve points hold achievements per episode),
    with a missed score target, so its miss line is written from the same curve."""
    monkeypatch.setattr(ablation, "ROOT", tmp_path)
    md, results = pages(tmp_path), tmp_path / "bench" / "results"
    for mode, got in (("rl", 2), ("rlgpt", 5)):  # achievements per episode: not a rate in [0, 1]
        cell = grid.Cell("crafter", mode, 1, 1_000_000)
        unlocked = [{a: 1 for a in env.ACHIEVEMENTS[:got]}] * 20
        run = fake_run(tmp_path / mode, cell, [50_000] * 20, unlocked)
        (run / "iter_1").mkdir()
        (run / "iter_1" / "stats.json").write_text(json.dumps(
            {"iteration": 1, "env_steps": 1_000_000, "success_rate": 0.0, "success_episodes": 20}))
        ablation.write_json(results / f"{cell.name}.json", ablation.result_of(cell, run))
    assert ablation.main(["--table"]) == 0
    text = md.read_text()
    link = "![crafter](results_crafter.png)"
    assert text.index(f"| {env.ACHIEVEMENTS[0]} | 100.0 | 100.0 |") < text.index(link) < text.index("**Targets**")
    assert (tmp_path / "docs" / "results_crafter.png").stat().st_size > 1000
    # both crafter targets (score, diamonds) are missed: the run is described once, its curve in its own unit,
    # and its "success" (no episode of a task without a single goal can succeed) said to be no measure
    assert text.count("- crafter__rlgpt__s1__1000000: ") == 1
    assert ("crafter__rlgpt__s1__1000000: curve (achievements unlocked per episode) peaked at 5.00 (env step "
            "100000), ended at 5.00; training success (none can succeed") in text


def test_crafter_achievements_are_one_column_per_mode_averaged_over_its_seeds(tmp_path, monkeypatch):
    monkeypatch.setattr(ablation, "ROOT", tmp_path)
    md, results = pages(tmp_path), tmp_path / "bench" / "results"
    for mode, seed, wood in (("rl", 1, 80.0), ("rl", 2, 90.0), ("rlgpt", 1, 99.0)):
        rates = dict.fromkeys(env.ACHIEVEMENTS, 0.0) | {"collect_wood": wood}
        fake_result(results, grid.Cell("crafter", mode, seed, 1_000_000), None, 0,
                    crafter={"score": 5.0, "episodes": 10, "achievements": rates})
    assert ablation.main(["--table"]) == 0
    text = md.read_text()
    assert "| achievement (% of episodes, mean over seeds) | ours: rl (n=2) | ours: rlgpt (n=1) |\n" in text
    assert "| collect_wood | 85.0 | 99.0 |\n" in text


def test_targets_are_met_missed_or_not_measured_and_a_miss_quotes_its_logs(tmp_path, monkeypatch):
    monkeypatch.setattr(ablation, "ROOT", tmp_path)
    md, results = pages(tmp_path), tmp_path / "bench" / "results"
    for seed in grid.SEEDS:  # collect_wood: 0.97 on average, aim 0.95
        fake_result(results, grid.Cell("collect_wood", "rlgpt", seed, 50_000), 0.96 + 0.01 * (seed - 1), 40)
    pickaxe = fake_result(results, grid.Cell("make_wood_pickaxe", "rlgpt", 2, 200_000), 0.5, 30)
    pickaxe["curve"][3]["success"] = 0.75  # the curve peaked before the end
    pickaxe["iterations"] = [
        {"iteration": 1, "code_actions": {}, "critic": "place_table returned True in only 0.1 of 50 calls",
         "train": {"success": 0.4, "n": 20}, "decided": ["place_table: try variant once"], "change": None},
        {"iteration": 2, "critic": None, "train": {"success": 0.5, "n": 30}, "decided": [],
         "change": "rolled back: success 0.5: worse", "code_actions": {
            "chop_tree": {"chosen": 900, "success_rate": 0.9, "error": None},
            "place_table_v2": {"chosen": 120, "success_rate": 0.25, "error": "line 4: IndexError: out of range"},
            "make_wood_pickaxe": {"chosen": 60, "success_rate": 0.5, "error": None,
                                  "ends": {"true": 30, "false_at_once": 25, "false_after_steps": 5}}}}]
    ablation.write_json(results / "make_wood_pickaxe__rlgpt__s2__200000.json", pickaxe)
    rates = dict.fromkeys(env.ACHIEVEMENTS, 0.0) | {"collect_diamond": 4.5}
    fake_result(results, grid.Cell("crafter", "rlgpt", 1, 1_000_000), None, 0,
                crafter={"score": 31.0, "episodes": 500, "achievements": rates})
    assert ablation.main(["--table"]) == 0
    text = md.read_text()
    assert row_of(text, "collect_wood, rlgpt")[0][3:] == ["0.97 ± 0.01 (n=3, 120 ep)", "met"]
    assert row_of(text, "make_wood_pickaxe, rlgpt")[0][2:] == ["0.9", "0.50 (n=1, 30 ep)", "missed (1 of 3 seeds run)"]
    one_of_three = " (1 of 3 seeds run)"
    assert row_of(text, "crafter, rlgpt", "Crafter score")[0][2:] == ["30", "31.00 (n=1, 500 ep)", "met" + one_of_three]
    assert row_of(text, "crafter, rlgpt", "collect_diamond (% of episodes)")[0][3:] == ["4.50 (n=1, 500 ep)",
                                                                                       "missed" + one_of_three]
    assert ("- make_wood_pickaxe__rlgpt__s2__200000: curve peaked at 0.75 (env step 80000), ended at 0.50; "
            "training success per iteration: 0.40 (n=20), 0.50 (n=30; the change rolled back); "
            "iteration 2: place_table_v2 0.25 of 120 calls (commonest error: line 4: IndexError: out of range), "
            'make_wood_pickaxe 0.50 of 60 calls, 25 returned at once without a step; critic: "place_table returned '
            'True in only 0.1 of 50 calls"\n') in text
    assert "- crafter__rlgpt__s1__1000000" in text and "collect_wood__rlgpt__s1" not in text.split("**Targets**")[1]
    for path in results.glob("*.json"):
        path.unlink()
    rows = len(grid.TARGETS) + len(grid.COMPARISONS) * sum(t != "crafter" for t in grid.BUDGETS) + \
        len(grid.LONG_COMPARISONS)
    assert ablation.main(["--table"]) == 0 and md.read_text().count("| not measured yet |") == rows


def test_rlgpt_is_set_against_each_ablation_and_crafter_keeps_what_rl_learns(tmp_path, monkeypatch):
    monkeypatch.setattr(ablation, "ROOT", tmp_path)
    md, results = pages(tmp_path), tmp_path / "bench" / "results"
    for seed in grid.SEEDS:
        for mode, success in (("rlgpt", 0.95), ("code", 0.98), ("rl+config", 0.5)):
            fake_result(results, grid.Cell("place_table", mode, seed, 100_000), success, 40)
        for mode, rates in (("rl", {"collect_wood": 90.0, "wake_up": 80.0, "place_plant": 40.0}),
                            ("rlgpt", {"collect_wood": 95.0, "wake_up": 60.0})):
            fake_result(results, grid.Cell("crafter", mode, seed, 1_000_000), None, 0, crafter={
                "score": 20.0, "episodes": 100, "achievements": dict.fromkeys(env.ACHIEVEMENTS, 0.0) | rates})
        for mode, score in (("code", 25.0), ("rlgpt-1iter", 19.0)):
            fake_result(results, grid.Cell("crafter", mode, seed, 1_000_000), None, 0, crafter={
                "score": score, "episodes": 100, "achievements": dict.fromkeys(env.ACHIEVEMENTS, 0.0)})
        for mode, success in (("rlgpt", 0.6), ("code", 0.615)):
            fake_result(results, grid.Cell("make_stone_pickaxe", mode, seed, 300_000), success, 40)
    assert ablation.main(["--table"]) == 0
    text = md.read_text()
    assert row_of(text, "crafter, rlgpt", "Crafter score, against `code`")[0][2:] == [">= code", "20.00 vs 25.00",
                                                                                       "missed"]
    idle = "met in number only: the critic decided no change in any iteration of the 3 `rlgpt` runs"
    assert row_of(text, "crafter, rlgpt", "Crafter score, against `rlgpt-1iter`")[0][4].startswith(idle)
    assert row_of(text, "make_stone_pickaxe, rlgpt", "training success at the budget, against `code`")[0][2:] == [
        ">= code -0.02", "0.60 vs 0.61", "met"]
    assert row_of(text, "collect_iron, rlgpt", "training success at the budget, against `code`")[0][4] == \
        "not measured yet"
    against = "training success at the budget, against "
    assert row_of(text, "place_table, rlgpt", against + "`code`")[0][2:] == [">= code -0.02", "0.95 vs 0.98", "missed"]
    assert row_of(text, "place_table, rlgpt", against + "`rl+config`")[0][4] == "met"
    assert row_of(text, "collect_stone, rlgpt", against + "`code`")[0][4] == "not measured yet"
    kept = row_of(text, "crafter, rlgpt", "each of the 2 achievements `rl` unlocks in > 50% of its episodes, "
                                          "against `rl`'s rate")
    assert kept[0][2:] == [">= 0.8x", "lowest: wake_up 60.0% vs 80.0% (0.75x)", "missed"]
    path = results / f"{grid.Cell('crafter', 'rlgpt', 1, 1_000_000).name}.json"  # one change decided in one run
    changed = json.loads(path.read_text()) | {"iterations": [{"decided": []}, {"decided": ["shape iron"]}]}
    path.write_text(json.dumps(changed))
    assert ablation.main(["--table"]) == 0
    assert row_of(md.read_text(), "crafter, rlgpt", "Crafter score, against `rlgpt-1iter`")[0][4] == "met"
    # two arms are compared over the seeds both ran: rlgpt's seed 2 scores low, but the control has only seed 1
    for seed in (2, 3):
        (results / f"{grid.Cell('crafter', 'rlgpt-1iter', seed, 1_000_000).name}.json").unlink()
    path = results / f"{grid.Cell('crafter', 'rlgpt', 2, 1_000_000).name}.json"
    low = json.loads(path.read_text())
    path.write_text(json.dumps(low | {"crafter": low["crafter"] | {"score": 5.0}}))
    assert ablation.main(["--table"]) == 0
    assert row_of(md.read_text(), "crafter, rlgpt", "Crafter score, against `rlgpt-1iter`")[0][3:] == [
        "20.00 vs 19.00 (1 of 3 seeds run by both)", "met"]


def test_check_fails_while_the_readme_differs_and_passes_after_table(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(ablation, "ROOT", tmp_path)
    pages(tmp_path)
    results = tmp_path / "bench" / "results"
    fake_result(results, grid.Cell("collect_wood", "rl", 1, 50_000), 0.5, 10)
    assert ablation.main(["--check"]) == 1 and "differs" in capsys.readouterr().out
    assert ablation.main(["--table"]) == 0 and ablation.main(["--check"]) == 0
    fake_result(results, grid.Cell("collect_wood", "rl", 2, 50_000), 0.7, 10)
    assert ablation.main(["--check"]) == 1
    assert ablation.main(["--table", "--check"]) == 0


def test_readme_gets_the_small_table_and_the_check_covers_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(ablation, "ROOT", tmp_path)
    md, results = pages(tmp_path), tmp_path / "bench" / "results"
    for seed, success in ((1, 0.5), (2, 0.7)):
        fake_result(results, grid.Cell("collect_wood", "rlgpt", seed, 50_000), success, 10)
    for seed, score in ((1, 10.0), (2, 14.0)):
        fake_result(results, grid.Cell("crafter", "rlgpt", seed, 1_000_000), None, 0,
                    crafter={"score": score, "episodes": 100, "achievements": dict.fromkeys(env.ACHIEVEMENTS, 0.0)})
    assert ablation.main(["--table"]) == 0
    readme = (tmp_path / "README.md").read_text()
    assert readme.startswith("# rlgpt\n\nintro\n\n<!-- headline:start -->") and readme.endswith("-->\n\nmore\n")
    assert "STALE-SECTION" not in readme and "4 of 57 grid cells have a result" in readme
    assert row_of(readme, "collect_wood", "50000")[0][2:] == ["—", "—", "—", "0.60 ± 0.14 (n=2, 20 ep)"]
    # crafter's row: rl and code have cells without a result, rl+config has no crafter cell
    assert row_of(readme, "crafter: Crafter score", "1000000")[0][2:] == [
        "—", "not run", "—", "12.00 ± 2.83 (n=2, 200 ep)"]
    assert "DreamerV3 14.5" in readme and "[docs/results.md](docs/results.md)" in readme
    assert "**Targets**" not in readme and "**Targets**" in md.read_text()  # the rest stays on the results page
    (tmp_path / "README.md").write_text(readme.replace("0.60 ± 0.14", "0.99 ± 0.14"))
    capsys.readouterr()
    assert ablation.main(["--check"]) == 1
    out = capsys.readouterr().out
    assert "README.md: its generated results section differs" in out and "results.md: its" not in out
    assert ablation.main(["--table"]) == 0 and (tmp_path / "README.md").read_text() == readme
    (tmp_path / "README.md").write_text("# rlgpt\n")
    with pytest.raises(SystemExit) as e:
        ablation.main(["--check"])
    assert e.value.code == 2 and "README.md has no <!-- headline:start -->" in capsys.readouterr().err


def test_bad_readme_or_result_file_is_a_sentence_and_exit_2(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(ablation, "ROOT", tmp_path)
    pages(tmp_path, "# no markers\n")
    with pytest.raises(SystemExit) as e:
        ablation.main(["--table"])
    assert e.value.code == 2 and "no <!-- results:start -->" in capsys.readouterr().err
    pages(tmp_path)
    (tmp_path / "bench" / "results").mkdir(parents=True)
    (tmp_path / "bench" / "results" / "x.json").write_text("{cut sho")
    with pytest.raises(SystemExit) as e:
        ablation.main(["--check"])
    assert e.value.code == 2 and "x.json is not a readable result file" in capsys.readouterr().err


def test_episode_lengths_per_iteration_sit_beside_success_and_crafter_has_their_table(tmp_path, monkeypatch):
    """A result that keeps each iteration's mean episode length (with its n) shows it: a table for crafter's
    runs, and beside the success in the missed targets' and the slow loop's lines; a result file from before
    it was kept still renders ("—" in the table, nothing beside the success)."""
    monkeypatch.setattr(ablation, "ROOT", tmp_path)
    md, results = pages(tmp_path), tmp_path / "bench" / "results"
    kept = [{"iteration": k, "train": {"success": s, "n": n}, "episode_length": {"mean": m, "n": n}, "change": None,
             "decided": [], "code_actions": {}, "critic": None}
            for k, s, m, n in ((1, 0.0, 311.6, 1066), (2, 0.0, 336.84, 987))]
    before = [{k: v for k, v in it.items() if k != "episode_length"} for it in kept]
    crafter = {"score": 5.0, "episodes": 2053, "achievements": dict.fromkeys(env.ACHIEVEMENTS, 0.0)}
    for seed, its in ((1, kept), (2, before)):
        cell = grid.Cell("crafter", "rlgpt", seed, 1_000_000)
        ablation.write_json(results / f"{cell.name}.json", fake_result(results, cell, None, 0, crafter=crafter)
                     | {"iterations": its})
    loop = grid.slowloop_grid()[0]  # an rlgpt cell: its slow-loop line
    ablation.write_json(results / f"{loop.name}.json", fake_result(results, loop, 0.5, 10) | {"iterations": [
        {"iteration": 1, "train": {"success": 0.25, "n": 40}, "episode_length": {"mean": 55.04, "n": 41},
         "change": None, "decided": []}]})
    assert ablation.main(["--table"]) == 0
    text = md.read_text()
    assert "**Mean episode length per iteration** (crafter; training episodes, n)" in text
    assert row_of(text, "rlgpt, seed 1") == [["rlgpt, seed 1", "311.6 (n=1066)", "336.8 (n=987)"]]
    assert row_of(text, "rlgpt, seed 2") == [["rlgpt, seed 2", "—", "—"]]
    assert ("per iteration: 0.00 (n=1066; mean length 311.6 steps, n=1066), 0.00 (n=987; mean length 336.8 steps, "
            "n=987; no change decided before it)") in text
    assert "per iteration: 0.00 (n=1066), 0.00 (n=987; no change decided before it)" in text  # seed 2: before
    assert f"- {loop.name}: iteration 1: 0.25 (n=40; mean length 55.0 steps, n=41)\n" in text
    # a result that keeps each iteration's Crafter score shows it, not a success that is always 0
    scored = [dict(it, score={"score": 30.0 + k, "se": 0.8, "episodes": it["episode_length"]["n"]})
              for k, it in enumerate(kept)]
    cell = grid.Cell("crafter", "rlgpt", 1, 1_000_000)
    ablation.write_json(results / f"{cell.name}.json", fake_result(results, cell, None, 0, crafter=crafter)
                        | {"iterations": scored})
    assert ablation.main(["--table"]) == 0
    text = md.read_text()
    assert row_of(text, "rlgpt, seed 1") == [
        ["rlgpt, seed 1", "30.0 ± 0.8; 311.6 (n=1066)", "31.0 ± 0.8; 336.8 (n=987)"]]
    assert ("Crafter score of the training episodes per iteration: 30.00 +- 0.80 (n=1066; mean length 311.6 steps, "
            "n=1066), 31.00 +- 0.80 (n=987; mean length 336.8 steps, n=987; no change decided before it)") in text

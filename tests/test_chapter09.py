"""Chapter 9's rendered page: every number its prose states is a glued value shown on the page,
and every comparison the prose makes holds for those values."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from _book_helpers import glued_fixture, glued_values, html_tables, page_fixture, shown

from mini_llm.engine.recorded import (
    RecordingError,
    checkpoint_path,
    load_weights,
    read_recording,
    write_recording,
)
from mini_llm.experiments import ch09_transformer_vs_gru as experiment
from mini_llm.seq2seq import is_held_out, number_pairs, vocabularies
from mini_llm.transformer import transformer_parameter_count

PAGE = "ch09_transformer"


page = page_fixture(PAGE)
glued = glued_fixture(PAGE, in_prose=False)


def test_layers_equal_pytorch(page, glued):
    assert shown(page, glued, "ch09_gap_layers", ".1e") <= 1e-5
    assert shown(page, glued, "ch09_gap_ln", ".1e") <= 1e-5
    _, text = page
    found = re.findall(r"(\w+coder, \w+-LN)\s+largest difference from PyTorch.s layer: (\S+)", text)
    assert sorted(name for name, _ in found) == [
        "decoder, post-LN",
        "decoder, pre-LN",
        "encoder, post-LN",
        "encoder, pre-LN",
    ]
    assert max(float(gap) for _, gap in found) == pytest.approx(glued["ch09_gap_layers"], rel=0.1)


def test_parameter_counts(page, glued):
    source, target = vocabularies()
    model = shown(page, glued, "ch09_params_model", ",")
    formula = shown(page, glued, "ch09_params_formula", ",")
    assert (
        model
        == formula
        == transformer_parameter_count(len(source), 32, 128, 2, 2, target_vocab_size=len(target))
    )
    raw, _ = page
    table = next(
        rows
        for rows in html_tables(raw)
        if rows and rows[0][0] == "model" and "published" in rows[0]
    )
    published = {row[0]: row[-1] for row in table[1:]}
    assert published == {
        "Transformer base": "65 M",
        "Transformer big": "213 M",
        "GPT-3 175B": "175 B",
    }
    base = shown(page, glued, "ch09_params_base", ".1f")
    big = shown(page, glued, "ch09_params_big", ".1f")
    gpt3 = shown(page, glued, "ch09_params_gpt3", ".1f")
    assert abs(base - 65) / 65 < 0.05 and abs(big - 213) / 213 < 0.05  # "rounded", close
    assert abs(gpt3 - 175) / 175 < 0.01
    assert base == pytest.approx(transformer_parameter_count(37_000, 512, 2048, 6, 6) / 1e6)
    # the approximation Vd + L_enc(4d² + 2d d_ff) + L_dec(8d² + 2d d_ff), cross-attention in
    d, d_ff = 512, 2048
    approx = 37_000 * d + 6 * (4 * d * d + 2 * d * d_ff) + 6 * (8 * d * d + 2 * d * d_ff)
    assert shown(page, glued, "ch09_approx_base", ".1f") == pytest.approx(approx / 1e6)
    share = shown(page, glued, "ch09_approx_share", ".1%")
    assert share == pytest.approx(1 - approx / (base * 1e6)) and 0 < share < 0.01  # "only"
    assert table[0][-2] == "exact count"
    _, text = page
    assert "4Ld^2 + 2Ld" not in text  # the old formula, without cross-attention


def _percent(cell: str) -> list[float]:
    """A table cell "99.97% (99.9–100.0)" as [mean, lowest, highest] fractions."""
    found = re.fullmatch(r"([\d.]+)% \(([\d.]+)–([\d.]+)\)", cell)
    assert found, f"not a mean (range) cell: {cell!r}"
    return [float(v) / 100 for v in found.groups()]


@pytest.fixture(scope="module")
def recording():
    return read_recording(experiment.NAME)


def _seeds(recording, key, subset="all"):
    return [run["exact_match"][subset] for run in recording["results"]["models"][key]["runs"]]


def test_the_recording_is_whole_and_of_the_page_s_experiment(recording):
    """The committed results file: a full-size run of this experiment, every model with its
    three seeds, the whole loss curve and the scores on every group of test numbers."""
    assert recording["command"] == "mini-llm record ch09-transformer-vs-gru"
    assert not recording["tiny"] and recording["schema"] == 1
    results = recording["results"]
    settings = results["settings"]
    assert settings["steps"] == experiment.STEPS and settings["batch"] == experiment.BATCH
    assert settings["seeds"] == list(experiment.SEEDS) and settings["threads"] == 1
    assert list(results["models"]) == list(experiment.MODELS)
    subsets = results["data"]["subsets"]
    assert subsets["all"] == results["data"]["test_numbers"] == experiment.TEST_PAIRS
    assert sum(n for name, n in subsets.items() if name != "all") == subsets["all"]
    for key, model in results["models"].items():
        family, width, norm_first = experiment.MODELS[key]
        assert (model["family"], model["width"], model["norm_first"]) == (
            family,
            width,
            norm_first,
        )
        built = experiment.build(key, 0)
        assert model["parameters"] == sum(p.numel() for p in built.parameters())
        assert [run["seed"] for run in model["runs"]] == settings["seeds"]
        for run in model["runs"]:
            assert len(run["losses"]) == settings["steps"]
            assert set(run["exact_match"]) == set(subsets)
            assert all(0 <= v <= 1 for v in run["exact_match"].values())
            assert 0 < run["cpu_seconds"] and 0 < run["seconds"]
    kept = results["checkpoint"]
    assert kept["model"] == experiment.CHECKPOINTED and kept["seed"] == settings["seeds"][0]
    assert checkpoint_path(recording, "model").stat().st_size < 5 * 2**20


def test_the_experiment_runs_end_to_end_at_a_tiny_size(tmp_path):
    """``run(out, tiny=True)``: the same code as the recording, every model, written and read
    back as ``mini-llm record`` does; a tiny recording is refused as a result."""
    before = torch.get_num_threads()
    try:
        outcome = experiment.run(tmp_path, tiny=True)
    finally:
        torch.set_num_threads(before)
    path = write_recording(
        experiment.NAME,
        outcome.results,
        command="mini-llm record ch09-transformer-vs-gru --tiny",
        wall_seconds=1.0,
        tiny=True,
        checkpoints=outcome.checkpoints,
        out_dir=tmp_path,
    )
    with pytest.raises(RecordingError, match="tiny"):
        read_recording(experiment.NAME, tmp_path)
    tiny = read_recording(experiment.NAME, tmp_path, allow_tiny=True)
    assert path == tmp_path / f"{experiment.NAME}.json"
    results = tiny["results"]
    assert list(results["models"]) == list(experiment.MODELS)
    assert results["settings"]["steps"] == experiment.TINY["steps"]
    for model in results["models"].values():
        assert len(model["runs"]) == len(experiment.TINY["seeds"])
        assert all(len(run["losses"]) == experiment.TINY["steps"] for run in model["runs"])
    assert results["data"]["overlap"] == 0
    # the checkpoint holds the kept model's weights, which score as recorded
    key, seed = results["checkpoint"]["model"], results["checkpoint"]["seed"]
    model = load_weights(experiment.build(key, seed), checkpoint_path(tiny, "model", tmp_path))
    assert sum(p.numel() for p in model.parameters()) == results["models"][key]["parameters"]


def test_the_page_says_where_and_how_it_was_recorded(page, recording):
    _, text = page
    flat = " ".join(text.split())
    machine = recording["hardware"]
    assert f"$ {recording['command']}" in flat
    minutes = f"{recording['wall_seconds'] / 60:.0f}"
    commit = recording["commit"][:10] + recording["commit"][40:]  # "(+ uncommitted changes)"
    assert (
        f"recorded {recording['date'][:10]} at commit {commit}, in "
        f"{minutes} minutes, on {machine['name']} ({machine['capability']}), 1 thread, "
        f"PyTorch {machine['torch']}"
    ) in flat
    assert "book/results/ch09-transformer-vs-gru.json" in flat
    assert "mini_llm.experiments.ch09_transformer_vs_gru" in flat


def test_transformer_against_gru(built_book, page, glued, recording):
    results = recording["results"]
    settings, models, data = results["settings"], results["models"], results["data"]
    assert shown(page, glued, "ch09_overlap") == 0  # disjoint by construction, and counted
    trained = shown(page, glued, "ch09_trained_numbers", ",")
    # "chapter 7's budget": the steps and pairs per step that chapter 7's page glued
    chapter_7 = glued_values(built_book, "ch07_attention", in_prose=False)
    steps, batch = shown(page, glued, "ch09_steps"), shown(page, glued, "ch09_batch")
    assert steps == int(str(chapter_7["ch07_steps"]).replace(",", ""))
    assert batch == int(chapter_7["ch07_batch"])
    assert (steps, batch) == (settings["steps"], settings["batch"])
    assert shown(page, glued, "ch09_warmup") == settings["warmup_iters"] > 0
    assert shown(page, glued, "ch09_held_out_one_in") == 5
    # the run's training streams and test set, drawn again: disjoint, and counted right
    streams = set()
    for seed in settings["seeds"]:
        rng = np.random.default_rng(seed)
        for _ in range(steps):
            streams |= {int("".join(d)) for _, d in number_pairs(batch, rng, "train")}
    test_pairs = number_pairs(1000, np.random.default_rng(99), "test", distinct=True)
    test = {int("".join(d)) for _, d in test_pairs}
    assert len(streams) == trained == data["trained_numbers"] and len(test) == 1000
    assert not streams & test
    assert all(is_held_out(n) for n in test) and not any(is_held_out(n) for n in streams)
    longest = max(len(words) for words, _ in test_pairs)
    assert shown(page, glued, "ch09_longest") == longest
    assert shown(page, glued, "ch09_long_from") == 7
    # the table: one row per recorded model, in the recording's order
    raw, _ = page
    table = next(rows for rows in html_tables(raw) if rows and rows[0][-1] == "CPU seconds per run")
    assert table[0] == [
        "model",
        "width",
        "parameters",
        "test numbers right (1,000)",
        "CPU seconds per run",
    ]
    names = {
        "gru-44": "GRU + attention",
        "post-32": "Transformer, post-LN",
        "pre-32": "Transformer, pre-LN",
        "gru-64": "GRU + attention",
        "post-48": "Transformer, post-LN",
        "pre-48": "Transformer, pre-LN",
    }
    assert [row[0] for row in table[1:]] == [names[key] for key in models]
    for row, (key, model) in zip(table[1:], models.items(), strict=True):
        assert row[1:3] == [str(model["width"]), f"{model['parameters']:,}"]
        mean, low, high = _percent(row[3])
        seeds = _seeds(recording, key)
        assert mean == pytest.approx(np.mean(seeds), abs=5e-4)
        assert (low, high) == pytest.approx((min(seeds), max(seeds)), abs=5e-4)
        assert (mean == 1.0) == (low == 1.0)  # a miss is never shown as 100.0%
        cpu = np.mean([run["cpu_seconds"] for run in model["runs"]])
        assert row[4] == f"{cpu:.1f}"
    # the sizes and scores the prose states, at both sizes
    sizes = {"": ("gru-64", "post-48", "pre-48"), "_small": ("gru-44", "post-32", "pre-32")}
    for suffix, keys in sizes.items():
        for name, key in zip(("gru", "post", "pre"), keys, strict=True):
            params = shown(page, glued, f"ch09_{name}{suffix}_params", ",")
            assert params == models[key]["parameters"]
            accuracy = shown(page, glued, f"ch09_{name}{suffix}_all", ".2%")
            assert accuracy == pytest.approx(np.mean(_seeds(recording, key)))
    ratio = shown(page, glued, "ch09_size_ratio", ".2f")
    assert ratio == pytest.approx(models["pre-48"]["parameters"] / models["gru-64"]["parameters"])
    assert 0.9 < ratio < 1.1  # "the same size"
    old = shown(page, glued, "ch09_old_ratio", ".1f")
    assert old == pytest.approx(models["gru-64"]["parameters"] / models["post-32"]["parameters"])
    # "the GRU is still ahead, on every seed", at both sizes
    flat = " ".join(page[1].split())
    assert "At the same size, the GRU is still ahead, on every seed." in flat
    for gru, post, pre in (("gru-44", "post-32", "pre-32"), ("gru-64", "post-48", "pre-48")):
        assert min(_seeds(recording, gru)) > max(_seeds(recording, post) + _seeds(recording, pre))
    assert shown(page, glued, "ch09_gru_worst", ".1%") == min(_seeds(recording, "gru-64"))
    assert shown(page, glued, "ch09_pre_best", ".1%") == max(_seeds(recording, "pre-48"))
    # "matching the size closes most of the gap"
    mean = {key: np.mean(_seeds(recording, key)) for key in models}
    half = shown(page, glued, "ch09_gap_half", ".1%")
    same = shown(page, glued, "ch09_gap_same", ".1%")
    assert half == pytest.approx(mean["gru-64"] - max(mean["post-32"], mean["pre-32"]))
    assert same == pytest.approx(mean["gru-64"] - max(mean["post-48"], mean["pre-48"]))
    assert "Matching the size closes most of the gap." in flat and 0 < same < half / 2
    # "post-LN is ahead of pre-LN on average at both sizes, on every seed at the smaller one;
    # at the larger one the seeds overlap"
    assert "post-LN is ahead of pre-LN on average at both sizes" in flat
    assert mean["post-32"] > mean["pre-32"] and mean["post-48"] > mean["pre-48"]
    assert min(_seeds(recording, "post-32")) > max(_seeds(recording, "pre-32"))
    assert min(_seeds(recording, "post-48")) <= max(_seeds(recording, "pre-48"))
    # the longest numbers, in the folded box: the GRU ahead there too, at both sizes
    long = f"7–{longest} words"
    assert shown(page, glued, "ch09_pre_long", ".2%") == pytest.approx(
        np.mean(_seeds(recording, "pre-48", long))
    )
    assert "It does not here: on the longest numbers too, the GRU is ahead" in flat
    for gru, *transformers in sizes.values():
        for key in transformers:
            assert np.mean(_seeds(recording, gru, long)) > np.mean(_seeds(recording, key, long))
    # "the Transformer's loss falls more slowly": higher at half the budget and at the end
    window = shown(page, glued, "ch09_loss_window")
    assert f"(mean of {window} steps and of the seeds)" in flat and 1 < window < steps // 2
    assert shown(page, glued, "ch09_half_steps") == steps // 2

    def smoothed(key, step):
        return np.mean([np.mean(r["losses"][step - window : step]) for r in models[key]["runs"]])

    for name, key in (("gru", "gru-64"), ("post", "post-48"), ("pre", "pre-48")):
        half_loss = shown(page, glued, f"ch09_{name}_loss_half", ".3f")
        end_loss = shown(page, glued, f"ch09_{name}_loss_end", ".4f")
        assert half_loss == pytest.approx(smoothed(key, steps // 2))
        assert end_loss == pytest.approx(smoothed(key, steps)) and end_loss < half_loss
    for name in ("post", "pre"):
        assert glued[f"ch09_{name}_loss_half"] > glued["ch09_gru_loss_half"]
        assert glued[f"ch09_{name}_loss_end"] > glued["ch09_gru_loss_end"]
    # the time per run: CPU seconds of one thread, "about the same" for the three
    for name, key in (("gru", "gru-64"), ("post", "post-48"), ("pre", "pre-48")):
        seconds = shown(page, glued, f"ch09_{name}_seconds", ".1f")
        assert seconds == pytest.approx(np.mean([r["cpu_seconds"] for r in models[key]["runs"]]))
        assert 0.8 < seconds / glued["ch09_gru_seconds"] < 1.25
    assert "on one thread: about the same." in flat
    # the speed argument points at chapter 8's measurement, by its figure's number
    assert re.search(
        r'href="ch08_self_attention\.html#fig-ch08-cost"><span[^>]*>Fig\. 8\.\d+', page[0]
    )
    # no sentence of the comparison is chosen by the code: the prose is written once
    assert not {"ch09_verdict", "ch09_speed"} & set(glued)


def test_the_page_shows_the_layers_code(page):
    _, text = page
    flat = " ".join(text.split())
    for name in ("EncoderLayer", "DecoderLayer.forward"):
        assert f"From mini_llm.transformer.{name}:" in flat
    for line in (
        "x = self.norm1(x + self.dropout(out))",
        "x = x + self.dropout(self.feed_forward(self.norm2(x)))",
        "out, cross_weights = self.cross_attention(self.norm2(x), src_mask, memory)",
    ):
        assert line in flat


def test_heads(page, glued):
    _, text = page
    peaks = [float(v) for v in re.findall(r"head \d: mean largest weight ([\d.]+)", text)]
    assert len(peaks) == 4
    assert shown(page, glued, "ch09_peak_pairs") == 300
    sharpest = shown(page, glued, "ch09_head_sharpest")
    flattest = shown(page, glued, "ch09_head_flattest")
    high = shown(page, glued, "ch09_head_peak_max", ".3f")
    low = shown(page, glued, "ch09_head_peak_min", ".3f")
    assert round(high, 3) == max(peaks) == peaks[sharpest]
    assert round(low, 3) == min(peaks) == peaks[flattest]
    assert peaks.count(max(peaks)) == 1  # "the sharpest head" is one head, no tie
    assert high > low  # "the heads read the source in different ways"


def test_gradients_at_initialisation(page, glued):
    _, text = page
    found = dict(
        re.findall(r"(post-LN|pre-LN): last layer / first layer, per seed \[([^\]]+)\]", text)
    )
    ratios = {name: [float(v) for v in values.split(",")] for name, values in found.items()}
    assert sorted(ratios) == ["post-LN", "pre-LN"] and all(len(r) == 3 for r in ratios.values())
    for name, key in (("post-LN", "post"), ("pre-LN", "pre")):
        mean = shown(page, glued, f"ch09_grad_{key}_mean", ".2f")
        assert mean == pytest.approx(sum(ratios[name]) / 3, abs=0.01)
        assert shown(page, glued, f"ch09_grad_{key}_min", ".2f") == pytest.approx(
            min(ratios[name]), abs=0.006
        )
        assert shown(page, glued, f"ch09_grad_{key}_max", ".2f") == pytest.approx(
            max(ratios[name]), abs=0.006
        )
    # written once, in plain prose, and true of the ratios the page printed
    assert min(ratios["post-LN"]) > max(ratios["pre-LN"]) and min(ratios["post-LN"]) > 1
    assert "the ratio of every post-LN seed is larger than that of every pre-LN seed" in (
        " ".join(text.split())
    )
    assert "ch09_grad_verdict" not in glued
    assert shown(page, glued, "ch09_ln_d") == 16 and shown(page, glued, "ch09_ln_heads") == 2
    assert shown(page, glued, "ch09_ln_layers") == 6
    assert shown(page, glued, "ch09_grad_pairs") == 256


def test_post_ln_pre_ln_and_warm_up(page, glued):
    _, text = page
    found = re.findall(r"(post|pre)-LN, warm-up\s+(\d+): final loss per seed \[([^\]]+)\]", text)
    per_seed = {(kind, int(w)): [float(v) for v in values.split(",")] for kind, w, values in found}
    warmup = shown(page, glued, "ch09_ln_warmup")
    assert shown(page, glued, "ch09_ln_steps") > warmup > 0
    assert shown(page, glued, "ch09_ln_lr", "g") == 0.01
    # the three settings the claim needs (pre-LN with warm-up is left out, and said so)
    assert sorted(per_seed) == [("post", 0), ("post", warmup), ("pre", 0)]
    assert "A fourth, pre-LN with warm-up, is left out" in text
    for (kind, warmup), values in per_seed.items():
        label = "cold" if warmup == 0 else "warm"
        assert len(values) == 3
        mean = shown(page, glued, f"ch09_{kind}_{label}_mean", ".2f")
        assert mean == pytest.approx(sum(values) / 3, abs=0.01)
        assert shown(page, glued, f"ch09_{kind}_{label}_min", ".2f") == pytest.approx(
            min(values), abs=0.006
        )
        assert shown(page, glued, f"ch09_{kind}_{label}_max", ".2f") == pytest.approx(
            max(values), abs=0.006
        )
    # the claims are written once, in plain prose; the printed losses must support them
    flat = " ".join(text.split())
    others = [v for key, values in per_seed.items() if key != ("post", 0) for v in values]
    assert min(per_seed["post", 0]) > max(others)
    assert (
        "Without warm-up, every post-LN seed ends above every run of the other two settings, "
        "pre-LN without warm-up included: the deep post-LN stack needs the warm-up, the pre-LN "
        "stack does not."
    ) in flat
    falling = shown(page, glued, "ch09_ln_still_falling")
    window, drop = shown(page, glued, "ch09_drop_window"), shown(page, glued, "ch09_drop_min")
    assert 1 <= falling <= 3 and (window, drop) == (50, 0.02)
    assert (
        f"slow rather than stuck: on {falling} of its 3 seeds the loss still fell by more than "
        f"{drop} over the last {window} steps"
    ) in flat
    assert all(v != float("inf") for values in per_seed.values() for v in values)
    assert "The loss of no run became infinite or NaN." in flat
    assert "the runs of this chapter show both at a depth of 6 + 6 layers" in flat
    assert not {"ch09_ln_verdict", "ch09_ln_summary"} & set(glued)

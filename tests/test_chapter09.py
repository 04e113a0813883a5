"""Chapter 9's rendered page: every number its prose states is a glued value shown on the page,
and every comparison the prose makes holds for those values."""

from __future__ import annotations

import ast
import json
import re

import numpy as np
import pytest
from _book_helpers import html_tables, read_page

from mini_llm.seq2seq import is_held_out, number_pairs, vocabularies
from mini_llm.transformer import transformer_parameter_count

PAGE = "ch09_transformer"


@pytest.fixture(scope="module")
def page(built_book):
    return read_page(built_book, PAGE)


@pytest.fixture(scope="module")
def glued(built_book):
    """name -> value of every glue() call, as the executed page recorded it."""
    executed = built_book.parent / "jupyter_execute" / f"{PAGE}.glue.json"
    records = json.loads(executed.read_text(encoding="utf-8"))
    return {
        name: ast.literal_eval(record["data"]["text/plain"]) for name, record in records.items()
    }


def shown(page, glued, name, spec=""):
    """The glued value, after checking that the prose shows it formatted with ``spec``."""
    _, text = page
    value = glued[name]
    assert format(value, spec) in text, f"{name} = {format(value, spec)} not on the page"
    return value


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


def _percent(cell: str) -> list[float]:
    return [float(v) / 100 for v in re.findall(r"([\d.]+)%", cell)]


def test_transformer_against_gru(page, glued):
    assert shown(page, glued, "ch09_overlap") == 0  # disjoint by construction, and counted
    trained = shown(page, glued, "ch09_trained_numbers", ",")
    # the page's training streams and test set, drawn again: disjoint, and counted right
    steps = glued["ch09_steps"]
    streams = set()
    for seed in (0, 1, 2):
        rng = np.random.default_rng(seed)
        for _ in range(steps):
            streams |= {int("".join(d)) for _, d in number_pairs(64, rng, "train")}
    test = {
        int("".join(d))
        for _, d in number_pairs(1000, np.random.default_rng(99), "test", distinct=True)
    }
    assert len(streams) == trained and len(test) == 1000 and not streams & test
    assert all(is_held_out(n) for n in test) and not any(is_held_out(n) for n in streams)
    raw, _ = page
    table = next(
        rows
        for rows in html_tables(raw)
        if rows and rows[0][0] == "model" and rows[0][1].startswith("all")
    )
    assert [row[0] for row in table[1:]] == ["GRU + attention", "Transformer"]
    assert table[0][1] == "all 1,000"
    cells = {row[0]: [_percent(c) for c in row[1:5]] for row in table[1:]}
    for name, key in (("GRU + attention", "gru"), ("Transformer", "tf")):
        mean, low, high = cells[name][0]
        assert low <= mean <= high  # mean (min-max) over the seeds
        assert shown(page, glued, f"ch09_{key}_all", ".1%") == pytest.approx(mean, abs=5e-4)
        assert shown(page, glued, f"ch09_{key}_long", ".1%") == pytest.approx(
            cells[name][3][0], abs=5e-4
        )
        assert shown(page, glued, f"ch09_{key}_seconds", ".1f") > 0
    verdict = shown(page, glued, "ch09_verdict")
    better = "Transformer" if glued["ch09_tf_all"] > glued["ch09_gru_all"] else "GRU + attention"
    worse = ({"Transformer", "GRU + attention"} - {better}).pop()
    assert f"the {better} is ahead" in verdict
    separated = cells[better][0][1] > cells[worse][0][2]
    assert ("ahead on every seed" in verdict) == separated
    assert "s / run" in table[0][-1]
    assert shown(page, glued, "ch09_steps") > 0


def test_heads(page, glued):
    _, text = page
    peaks = [float(v) for v in re.findall(r"head \d: mean largest weight ([\d.]+)", text)]
    assert len(peaks) == 4
    sharpest = shown(page, glued, "ch09_head_sharpest")
    flattest = shown(page, glued, "ch09_head_flattest")
    high = shown(page, glued, "ch09_head_peak_max", ".2f")
    low = shown(page, glued, "ch09_head_peak_min", ".2f")
    assert round(high, 2) == max(peaks) == peaks[sharpest]
    assert round(low, 2) == min(peaks) == peaks[flattest]
    assert high > low  # "the heads read the source in different ways"


def test_post_ln_pre_ln_and_warm_up(page, glued):
    _, text = page
    found = re.findall(r"(post|pre)-LN, warm-up\s+(\d+): final loss per seed \[([^\]]+)\]", text)
    per_seed = {(kind, int(w)): [float(v) for v in values.split(",")] for kind, w, values in found}
    warmup = shown(page, glued, "ch09_ln_warmup")
    assert shown(page, glued, "ch09_ln_steps") > warmup > 0
    assert sorted(per_seed) == [("post", 0), ("post", warmup), ("pre", 0), ("pre", warmup)]
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
    verdict = shown(page, glued, "ch09_ln_verdict")
    others = [v for key, values in per_seed.items() if key != ("post", 0) for v in values]
    stuck = min(per_seed["post", 0]) > max(others)
    assert ("stays stuck" in verdict) == stuck
    finite = all(v != float("inf") for values in per_seed.values() for v in values)
    assert ("the loss of no run became infinite" in verdict) == finite

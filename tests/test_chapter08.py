"""Chapter 8's rendered page: every number its prose states is a glued value, shown on the page,
and every comparison the prose makes holds for those values."""

from __future__ import annotations

import math
import re

import pytest
from _book_helpers import glued_fixture, html_tables, page_fixture, shown
from bs4 import BeautifulSoup

page = page_fixture("ch08_self_attention")
glued = glued_fixture("ch08_self_attention", in_prose=False)


def test_it_attends_to_agent(page, glued):
    weight = shown(page, glued, "ch08_it_agent", ".2f")
    _, text = page
    others = [float(w) for w in re.findall(r"'it' -> (?!agent)\w+\s+([\d.]+)", text)]
    assert len(others) == 6 and weight > 1 / 7 and weight > max(others)
    assert shown(page, glued, "ch08_plain_average", ".2f") == pytest.approx(1 / 7)
    # the worked numbers: dot product 4 (the entry of W_q), divided by sqrt(4 features)
    assert shown(page, glued, "ch08_it_dot", ".0f") == 4
    assert shown(page, glued, "ch08_it_other_dots", ".0f") == 0
    assert shown(page, glued, "ch08_it_dk", "") == 4
    score = shown(page, glued, "ch08_it_score", ".0f")
    others_count = shown(page, glued, "ch08_it_others", "")
    assert score == 2 and others_count == 6
    assert weight == pytest.approx(math.exp(score) / (math.exp(score) + others_count))


def test_equal_to_pytorch_and_to_the_gpt(page, glued):
    for name in ("ch08_gap_sdpa", "ch08_gap_mha", "ch08_gap_gpt"):
        assert glued[name] <= 1e-6, name
    _, text = page
    assert "largest difference from PyTorch's function" in text
    assert "largest difference from the GPT's attention" in text


def test_square_root_scaling_measured(page, glued):
    n_keys = shown(page, glued, "ch08_n_keys", "")
    _, text = page
    assert "max weight (unscaled)" in text and "max weight (scaled)" in text
    low = shown(page, glued, "ch08_var_ratio_min", ".2f")
    high = shown(page, glued, "ch08_var_ratio_max", ".2f")
    assert 0.9 < low <= high < 1.1  # Var(q.k) = d_k
    top_unscaled = shown(page, glued, "ch08_top_unscaled_512", ".2f")
    top_scaled = shown(page, glued, "ch08_top_scaled_512", ".2f")
    assert top_unscaled > 0.8 and top_scaled < 0.4  # one-hot without, spread with
    entropy_unscaled = shown(page, glued, "ch08_entropy_unscaled_512", ".2f")
    entropy_scaled = shown(page, glued, "ch08_entropy_scaled_512", ".2f")
    uniform = shown(page, glued, "ch08_entropy_uniform", ".2f")
    assert uniform == pytest.approx(math.log(n_keys))
    assert entropy_unscaled < 0.5 and entropy_scaled > 0.8 * uniform  # "close to uniform"


def test_training_with_and_without_scaling(page, glued):
    _, text = page
    found = re.findall(
        r"(with|without) scaling: loss < 0\.1 \(5-step mean\) after "
        r"\[([\d, ]+)\] steps",
        text,
    )
    runs = {which: [int(s) for s in steps.split(",")] for which, steps in found}
    assert set(runs) == {"with", "without"} and all(len(r) == 3 for r in runs.values())
    scaled = shown(page, glued, "ch08_steps_scaled", ".0f")
    unscaled = shown(page, glued, "ch08_steps_unscaled", ".0f")
    assert scaled == pytest.approx(sum(runs["with"]) / 3)
    assert unscaled == pytest.approx(sum(runs["without"]) / 3)
    ratio = shown(page, glued, "ch08_steps_ratio", ".1f")
    assert ratio == pytest.approx(unscaled / scaled)
    assert ratio > 1  # "the unscaled model is slower"
    per_seed = [u / s for u, s in zip(runs["without"], runs["with"], strict=True)]
    assert shown(page, glued, "ch08_steps_ratio_min", ".1f") == pytest.approx(min(per_seed))
    assert shown(page, glued, "ch08_steps_ratio_max", ".1f") == pytest.approx(max(per_seed))
    budget = shown(page, glued, "ch08_budget", "")
    assert "All six runs got there." in text  # the page asserts it too
    assert max(runs["with"] + runs["without"]) < budget
    assert shown(page, glued, "ch08_toy_length", "") == 16
    assert shown(page, glued, "ch08_toy_vocab", "") == 16
    assert shown(page, glued, "ch08_toy_width", "") == 64
    assert shown(page, glued, "ch08_toy_batch", "") == 32
    assert "1.5 to 2 times" not in text  # an unsourced claim, cut


def test_masks_and_empty_rows(page, glued):
    _, text = page
    assert glued["ch08_prefix_change_causal"] <= 1e-6  # float32 rounding at most
    assert glued["ch08_prefix_change_none"] > 0.01
    assert "-inf fill: [[nan, nan, nan]]" in text
    assert "-1e9 fill: [[0.3333333" in text
    assert "mini_llm : [[0.0, 0.0, 0.0]]" in text
    # float16: -1e9 overflows (an error in masked_fill, -inf when converted)
    assert "float16, -1e9 fill: value cannot be converted to type c10::Half" in text
    assert "float16, -1e9 converted: -inf" in text
    half_min = shown(page, glued, "ch08_half_min", ",.0f")
    assert half_min == -65504.0
    assert "float16, finfo.min = -65504 fill: [[0.333" in text
    # PyTorch: the fused function zeroes an empty row; nn.MultiheadAttention gives nan when it
    # also computes the weights (its default) and 0 when it does not
    assert "F.scaled_dot_product_attention, output: [[[0.0, 0.0]]]" in text
    assert "nn.MultiheadAttention, need_weights=True , output: [[[nan, nan]]]" in text
    assert "nn.MultiheadAttention, need_weights=False, output: [[[0.0, 0.0]]]" in text
    # a side study: folded away from the chapter's path, in a closer-look box
    raw, _ = page
    boxes = BeautifulSoup(raw, "html.parser").select("div.admonition.dropdown")
    folded = [b.get_text() for b in boxes if "A closer look: filling with" in b.get_text()]
    assert len(folded) == 1 and "float16, -1e9 converted: -inf" in folded[0]


def test_positions(page, glued):
    assert shown(page, glued, "ch08_gap_perm", ".1e") < 1e-5
    assert shown(page, glued, "ch08_gap_perm_pe", ".2f") > 0.05
    correct = shown(page, glued, "ch08_spread_correct", ".1e")
    wrong = shown(page, glued, "ch08_spread_wrong", ".2f")
    assert correct < 1e-5 and wrong > 0.1
    # the prose names the distances the code measured
    last_k = glued["ch08_spread_last_k"]
    _, text = page
    assert f"PE(p).PE(p+k), k = 1..{last_k}: {correct:.1e}" in text
    assert (
        f"is at most {correct:.1e} for every distance \\(k\\) from 1 to {last_k} (rounding); "
        f"with \\(j/d\\) it is up to {wrong:.2f}."
    ) in " ".join(text.split())


def test_extrapolation(page, glued):
    raw, _ = page
    table = next(rows for rows in html_tables(raw) if rows and rows[0][0] == "positions")
    assert [row[0] for row in table[1:]] == ["learned", "sinusoidal", "relative"]
    for scheme in ("learned", "sinusoidal", "relative"):
        assert shown(page, glued, f"ch08_seen_{scheme}", ".1%") > 0.95  # all three learn it
        assert glued[f"ch08_beyond_min_{scheme}"] <= glued[f"ch08_beyond_{scheme}"]
        assert glued[f"ch08_beyond_{scheme}"] <= glued[f"ch08_beyond_max_{scheme}"]
    learned = shown(page, glued, "ch08_beyond_learned", ".1%")
    sinusoidal = shown(page, glued, "ch08_beyond_sinusoidal", ".1%")
    relative = shown(page, glued, "ch08_beyond_relative", ".1%")
    chance = shown(page, glued, "ch08_chance", ".2%")
    assert chance == 1 / 16
    assert learned < 2 * chance  # "about chance"
    train_length = shown(page, glued, "ch08_ext_train_length", "")
    test_length = shown(page, glued, "ch08_ext_test_length", "")
    assert shown(page, glued, "ch08_ext_last", "") == test_length - 1
    assert table[0][1] == f"accuracy, length {train_length}"
    assert f"{train_length}–{test_length - 1} of length {test_length}" in table[0][2]
    assert shown(page, glued, "ch08_ext_width", "") == 32
    assert shown(page, glued, "ch08_ext_steps", "") == 200
    assert shown(page, glued, "ch08_shared_distance", "") == 15
    assert relative > max(learned, sinusoidal) + 0.2  # the relative bias extrapolates
    # "it still falls short of" its accuracy at the trained length, and the keys that share the
    # last distance bias "draw more of its weight" in the longer input
    assert relative < glued["ch08_seen_relative"]
    far_seen = shown(page, glued, "ch08_far_seen", ".2f")
    far_beyond = shown(page, glued, "ch08_far_beyond", ".2f")
    assert far_beyond > far_seen + 0.1
    _, text = page
    assert (
        f"mean of 3 seeds: {far_seen:.2f} at length {train_length},\n{far_beyond:.2f} at "
        f"positions {train_length}–{test_length - 1} of length {test_length}"
    ) in text
    flat = " ".join(text.split())  # the prose states the same values
    assert (
        f"{relative:.1%}, far above the other two. It still falls short of its "
        f"{glued['ch08_seen_relative']:.1%} at the trained length"
    ) in flat
    assert (
        f"The keys {glued['ch08_shared_distance']} or more steps back take {far_seen:.2f} of "
        f"the weight at the trained "
        f"length and {far_beyond:.2f} beyond it."
    ) in flat


def test_heads_cost_nothing_extra_and_split_the_work(page, glued):
    raw, _ = page
    assert shown(page, glued, "ch08_params", "") == "16,384" == f"{4 * 64 * 64:,}"
    assert glued["ch08_params_distinct"] == 1 and glued["ch08_flops_distinct"] == 1
    T, d = shown(page, glued, "ch08_flops_T", ""), shown(page, glued, "ch08_flops_d", "")
    assert (T, d) == (128, 64)
    assert shown(page, glued, "ch08_flops", "") == f"{8 * T * d * d + 4 * T * T * d:,}"
    table = next(rows for rows in html_tables(raw) if rows and rows[0][0] == "heads H")
    assert table[0][-1] == f"matmul FLOPs (T = {T})"
    assert shown(page, glued, "ch08_head_steps", "") == 400
    assert [row[0] for row in table[1:]] == ["1", "2", "4", "8"]
    k0, k1 = shown(page, glued, "ch08_head0_k", ".0f"), shown(page, glued, "ch08_head1_k", ".0f")
    assert {k0, k1} == {1, 3}  # each head took one of the two distances
    assert shown(page, glued, "ch08_head0_w", ".2f") > 0.8
    assert shown(page, glued, "ch08_head1_w", ".2f") > 0.8
    # one head against two, same parameters, steps and seeds: the page prints every seed
    _, text = page
    for name, printed in (("one", "1 head"), ("two", "2 heads")):
        pattern = rf"^{printed}: accuracy on both outputs, seeds 0-2: (.+)$"
        line = re.search(pattern, text, re.MULTILINE)
        seeds = [float(v.rstrip("%")) / 100 for v in line.group(1).split(", ")]
        mean = shown(page, glued, f"ch08_{name}_head_mean", ".1%")
        low, high = glued[f"ch08_{name}_head_min"], glued[f"ch08_{name}_head_max"]
        assert len(seeds) == 3 and mean == pytest.approx(sum(seeds) / 3, abs=1e-3)
        assert (low, high) == pytest.approx((min(seeds), max(seeds)), abs=1e-3)
        assert shown(page, glued, f"ch08_{name}_head_min", ".1%") == pytest.approx(low)
        if name == "one":
            assert shown(page, glued, "ch08_one_head_max", ".1%") == pytest.approx(high)
    assert glued["ch08_two_head_min"] > 0.95
    assert glued["ch08_one_head_max"] < glued["ch08_two_head_min"] - 0.2  # heads buy accuracy
    width = shown(page, glued, "ch08_head_width", "")
    assert width == 32
    flat = " ".join(text.split())  # the prose gives the values the code printed
    assert f"Train the toy model (\\(d\\) = {width}) to output both" in flat
    one, two = (glued[f"ch08_{name}_head_mean"] for name in ("one", "two"))
    assert f"One head gets {one:.1%} of the outputs right on average" in flat
    worst = glued["ch08_two_head_min"]
    assert f"two heads {two:.1%} (the worst seed {worst:.1%})" in flat


def test_cost(page, glued):
    assert shown(page, glued, "ch08_slope_bytes", ".2f") == pytest.approx(2, abs=0.01)
    slope_time = shown(page, glued, "ch08_slope_time", ".2f")
    slope_rnn = shown(page, glued, "ch08_slope_rnn", ".2f")
    assert slope_time > 1.6  # "roughly the n^2 of the entries, or steeper" (the page asserts it)
    assert slope_rnn < slope_time  # "the RNN's time grows more slowly"
    first = shown(page, glued, "ch08_rnn_over_attention_first", ".1f")
    last = shown(page, glued, "ch08_rnn_over_attention_last", ".1f")
    assert first > 1 and last < first  # slower at n = 128; the gap closes
    _, text = page
    flat = " ".join(text.split())
    assert "roughly the \\(n^2\\) of the entries, or steeper" in flat
    assert "the quadratic work gains on the chain as \\(n\\) grows" in flat
    # "most of a step is the fixed cost": its arithmetic is under half the fastest step
    step_min = shown(page, glued, "ch08_rnn_step_min", ".1f")
    step_max = shown(page, glued, "ch08_rnn_step_max", ".1f")
    arithmetic = shown(page, glued, "ch08_rnn_step_arithmetic", ".2f")
    assert step_max >= step_min and arithmetic < step_min / 2
    assert f"A step of the chain takes {step_min:.1f} to {step_max:.1f} µs" in flat
    assert f"would take {arithmetic:.2f} µs, so most of a step is the fixed cost" in flat
    lengths = [int(n) for n in re.findall(r"n = +(\d+): attention", text)]
    assert lengths == [128, 256, 512, 1024, 2048]
    assert shown(page, glued, "ch08_cost_first", "") == lengths[0]
    assert shown(page, glued, "ch08_cost_last", "") == lengths[-1]
    assert shown(page, glued, "ch08_cost_fit_from", "") == lengths[2]
    assert shown(page, glued, "ch08_cost_d", "") == 64


def test_page_has_its_figures_diagram_and_math(page, built_book):
    raw, text = page
    assert len(re.findall(r'<img[^>]+src="[^"]+\.png"', raw)) >= 6
    diagram = re.search(
        r'<(?:object|img)[^>]+(?:data|src)="([^"]+\.svg)"[^>]*class="graphviz"', raw
    )
    assert diagram, "no diagram"
    # relative positions are a bias on the scores: their edge goes to the attention, not to x
    svg = (built_book / diagram.group(1)).read_text(encoding="utf-8")
    assert "a bias per distance" in svg and "the scores" in svg
    assert "the same FLOPs as one head" in text
    for n in range(1, 8):
        assert f"Fig. 8.{n}" in text, f"Fig. 8.{n} is not referred to"
    assert raw.count('class="math') >= 8


def test_the_running_average_is_a_lower_triangular_product_and_a_masked_softmax(page):
    _, text = page
    number = r"(\d\.\de[+-]\d+)"  # as printed, not the f-string in the code
    found = re.search(rf"A @ X against the loop: largest difference {number}", text)
    assert found and float(found[1]) < 1e-6
    found = re.search(rf"softmax of the masked scores against A: largest difference {number}", text)
    assert found and float(found[1]) < 1e-6
    # the printed corner of A: row t holds 1/t on its first t entries
    assert re.search(r"\[\[1\.0000, 0\.0000, 0\.0000, 0\.0000\],\s+\[0\.5000, 0\.5000,", text)


def test_one_trained_head_looks_one_character_back(page, glued):
    """The recorded GPT's head, recomputed here from the checkpoint: the shares the prose
    states are the ones these weights give."""
    import torch

    from mini_llm.engine.recorded import checkpoint_path, read_recording
    from mini_llm.experiments.ch11_gpt_cpu import trained_model
    from mini_llm.experiments.shakespeare import shakespeare_splits
    from mini_llm.self_attention import causal_mask, scaled_dot_product_attention

    recording = read_recording("ch11-gpt-cpu")
    gpt = trained_model(recording["results"], checkpoint_path(recording, "model"))
    line = "To be, or not to be, that is the question:"
    ids = torch.tensor([shakespeare_splits()[0].encode(line)])
    n = ids.shape[1]
    with torch.no_grad():
        block = gpt.blocks[0]
        x = gpt.token_embedding(ids) + gpt.position_embedding(torch.arange(n))
        _, weights = scaled_dot_product_attention(*block.attn.heads(block.ln_1(x)), causal_mask(n))
    back = (torch.arange(n)[:, None] - torch.arange(n)[None, :]).clamp(min=0)
    w = weights[0, int((weights[0] * back).sum(-1).mean(-1).argmin())]
    one_back = (w.argmax(-1)[1:] == torch.arange(n - 1)).float().mean().item()
    assert shown(page, glued, "ch08_head_one_back", ".0%") == pytest.approx(one_back, abs=0.005)
    near = (w * (back < 3)).sum(-1).mean().item()
    assert shown(page, glued, "ch08_head_near", ".0%") == pytest.approx(near, abs=0.005)
    assert one_back > 0.5 and near > 0.6

"""Chapter 13's rendered page: every number its prose states is a glued value shown on the page,
and every comparison the prose makes (the MLP ahead at every size, the gap closing, the
positions used but not a grid, the class token's weight on ink) holds for those values."""

from __future__ import annotations

import re

import pytest
from _book_helpers import glued_fixture, page_fixture, shown

from mini_llm import vit
from mini_llm.corpus import load_digits

page = page_fixture("ch13_vision_transformer")
glued = glued_fixture("ch13_vision_transformer", in_prose=False)


def test_the_split_and_the_patches(page, glued):
    n_train = shown(page, glued, "ch13_n_train", ",")
    n_test = glued["ch13_n_test"]
    assert n_train + n_test == shown(page, glued, "ch13_n_digits", ",") == len(load_digits()[1])
    _, text = page
    # 8 x 8 digits in 2 x 2 patches: 16 tokens of 4 values, for every test image
    assert f"patches ({n_test}, 16, 4)" in text


def test_the_parameter_count_is_derived_and_the_mlp_matches_it(page, glued):
    n_vit = shown(page, glued, "ch13_vit_params", ",")
    assert n_vit == vit.parameter_count(vit.VisionTransformer())
    _, text = page
    assert f"by formula {n_vit}  counted {n_vit}" in text
    share = shown(page, glued, "ch13_encoder_share", ".0f")
    assert 90 < share < 100  # "almost all of it is in the encoder layers"
    n_mlp = shown(page, glued, "ch13_mlp_params", ",")
    hidden = shown(page, glued, "ch13_mlp_hidden")
    assert n_mlp == vit.parameter_count(vit.PixelMLP(hidden=hidden))
    assert n_mlp == vit.parameter_count(vit.matched_mlp(n_vit))
    assert abs(n_mlp - n_vit) / n_vit < 0.01  # "as close as a whole number of units allows"


def test_the_mlp_leads_with_little_data_and_the_gap_closes(page, glued):
    small, full = {}, {}
    for name in ("vit", "mlp"):
        small[name] = shown(page, glued, f"ch13_{name}_small", ".1f")
        full[name] = shown(page, glued, f"ch13_{name}_full", ".1f")
    gap_small = shown(page, glued, "ch13_gap_small", ".1f")
    assert gap_small == pytest.approx(small["mlp"] - small["vit"], abs=1e-9)
    # "most of the gap has closed" on the whole training set
    assert abs(full["mlp"] - full["vit"]) < gap_small / 3
    assert shown(page, glued, "ch13_small") < shown(page, glued, "ch13_middle")
    assert glued["ch13_middle"] < glued["ch13_n_train"]
    _, text = page
    printed = re.findall(r"(\d+) images: ViT ([\d.]+), MLP ([\d.]+)", text)
    assert len(printed) == 3
    gaps = [float(mlp) - float(v) for _, v, mlp in printed]
    assert gaps[0] > 0 and gaps[1] > 0 and gaps[0] > 2 * gaps[1]  # ahead, by less with more


def test_the_positions_are_used_but_do_not_form_a_grid(page, glued):
    shuffled = shown(page, glued, "ch13_shuffled", ".0f")
    assert 0 < shuffled < 25  # "barely above the 10 % of guessing"
    near = shown(page, glued, "ch13_near", "+.3f")
    far = shown(page, glued, "ch13_far", "+.3f")
    # both "near the 0 of two random directions", neighbours "hardly more alike"
    assert abs(near) < 0.15 and abs(far) < 0.15 and near - far < 0.15
    _, text = page
    seeds = re.findall(r"seed \d: accuracy ([\d.]+), shuffled ([\d.]+)", text)
    assert len(seeds) == 3 and all(float(after) < float(before) - 0.5 for before, after in seeds)


def test_some_heads_read_the_ink_and_others_the_background(page, glued):
    top = shown(page, glued, "ch13_top_ink_ratio", ".1f")
    low = shown(page, glued, "ch13_low_ink_ratio", ".2f")
    assert top > 2 and low < 1
    _, text = page
    models = re.findall(r"seed \d: layer 1: ([\d. ]+?)\s+layer 2: ([\d. ]+)", text)
    assert len(models) == 3
    for first, second in models:
        ratios = [float(r) for r in (first + " " + second).split()]
        assert len(ratios) == 8  # 2 layers x 4 heads
        assert max(ratios) >= round(top, 1) and min(ratios) <= round(low, 2) + 0.005


def test_page_has_its_figures_diagram_and_math(page, built_book):
    raw, text = page
    assert len(re.findall(r'<img[^>]+src="[^"]+\.png"', raw)) >= 3
    diagram = re.search(
        r'<(?:object|img)[^>]+(?:data|src)="([^"]+\.svg)"[^>]*class="graphviz"', raw
    )
    assert diagram, "no diagram"
    svg = (built_book / diagram.group(1)).read_text(encoding="utf-8")
    assert "class token" in svg and "encoder layer" in svg
    for n in range(1, 5):
        assert f"Fig. 13.{n}" in text, f"Fig. 13.{n} is not referred to"
    assert raw.count('class="math') >= 6

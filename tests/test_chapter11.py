"""Chapter 11's rendered page: every number its prose states is a glued value shown on the page,
and every comparison the prose makes holds for those values."""

from __future__ import annotations

import inspect
import math
import re
import shlex

import numpy as np
import pytest
import torch
from _book_helpers import (
    BOOK_DIR,
    glued_fixture,
    html_tables,
    page_fixture,
)

from mini_llm.cli import DEFAULT_CONFIG, build_parser
from mini_llm.engine.configs import CONFIGS, resolve
from mini_llm.engine.data import prepare
from mini_llm.engine.recorded import read_recording
from mini_llm.generate import next_token
from mini_llm.gpt import MLP as GPT_MLP
from mini_llm.gpt import GPTConfig, parameter_count
from mini_llm.learner.registry import PARTS, parts_of

PAGE = "ch11_gpt"


page = page_fixture(PAGE)
glued = glued_fixture(PAGE, in_prose=False)


def test_every_glued_number_in_the_prose_is_on_the_page(page, glued):
    """Each {glue:text}`key:spec` of the source shows the glued value, formatted by spec."""
    _, text = page
    source = (BOOK_DIR / f"{PAGE}.md").read_text(encoding="utf-8")
    references = re.findall(r"\{glue:text\}`(ch11_\w+)(?::([^`]*))?`", source)
    assert len(references) > 40
    flat = " ".join(text.replace("\u2019", "'").split())  # Sphinx's curly apostrophes
    for name, spec in references:
        shown = " ".join(format(glued[name], spec).split())
        assert shown in flat, f"{name} = {shown!r} is not on the page"


def table(page, first_header):
    raw, _ = page
    return next(rows for rows in html_tables(raw) if rows and rows[0][0] == first_header)


def test_design_choices_measured(page, glued):
    _, text = page
    # GELU's gradient is zero nowhere in [-3, 3], ReLU's on the negative half: recomputed.
    x = torch.linspace(-3, 3, 601, requires_grad=True)
    torch.nn.functional.relu(x).sum().backward()
    assert glued["ch11_relu_dead"] == pytest.approx((x.grad == 0).float().mean().item())
    assert glued["ch11_gelu_dead"] < glued["ch11_relu_dead"]
    # "nearly constant" with the scaling, several times its input without it
    assert glued["ch11_rms_growth_scaled"] == pytest.approx(
        glued["ch11_rms_scaled"] / glued["ch11_rms_in"]
    )
    assert glued["ch11_rms_growth_unscaled"] == pytest.approx(
        glued["ch11_rms_unscaled"] / glued["ch11_rms_in"]
    )
    assert glued["ch11_rms_growth_scaled"] < 1.5
    assert glued["ch11_rms_growth_unscaled"] > 3 * glued["ch11_rms_growth_scaled"]
    found = re.search(r"RMS of the stream: ([\d.]+) going in,\s+([\d.]+) out", text)
    assert float(found[2]) == pytest.approx(glued["ch11_rms_scaled"], abs=5e-4)


def test_causal_mask_and_training_without_it(page, glued):
    assert glued["ch11_mask_earlier"] == 0.0  # "do not move at all"
    assert glued["ch11_mask_at_change"] > 0  # "the changed position's own logits always do"
    # Without the mask the training loss falls far below the masked model's (copying) ...
    assert glued["ch11_unmasked_train"] < glued["ch11_masked_train"] / 2  # seed 0, the figure
    assert glued["ch11_mask_seeds"] >= 3  # in every seed: the worst unmasked beats the best
    assert glued["ch11_unmasked_train_high"] < glued["ch11_masked_train_low"] / 2
    # ... and the copying is useless where there is nothing to copy.
    assert glued["ch11_unmasked_last_low"] > glued["ch11_masked_last_high"]
    _, text = page
    for name in ("unmasked_train", "masked_train", "unmasked_last", "masked_last"):
        low, high = (f"{glued[f'ch11_{name}_{end}']:.2f}" for end in ("low", "high"))
        assert f"{low}–{high}" in text, name  # the prose states each range as glued
    # "reads token t + 1": far more than an even spread over the window
    assert glued["ch11_next_weight"] > 2 / glued["ch11_mask_block"]
    assert glued["ch11_uniform"] == pytest.approx(math.log(82))
    losses = re.findall(r"seed 0, (with|without) the mask\s*: training loss ([\d.]+)", text)
    assert dict(losses) == {
        "with": f"{glued['ch11_masked_train']:.2f}",
        "without": f"{glued['ch11_unmasked_train']:.2f}",
    }


def test_the_trained_model_is_the_recorded_whole_schedule_run(page, glued):
    """The page's GPT is the shakespeare-char-cpu config run for all its steps, loaded from the
    recorded checkpoint, and the page says where it was recorded."""
    config = CONFIGS["shakespeare-char-cpu"]
    recording = read_recording("ch11-gpt-cpu")
    results = recording["results"]
    assert glued["ch11_config_steps"] == config["max_iters"] == results["steps"]
    assert glued["ch11_batch"] == config["batch_size"] == results["batch_size"]
    assert glued["ch11_tokens_seen"] == config["max_iters"] * config["batch_size"] * 64
    shape = GPTConfig(
        vocab_size=82,
        **{k: config[k] for k in ("n_layer", "n_head", "n_embd", "block_size")},
    )
    assert glued["ch11_gpt_params"] == shape.parameter_count() == results["parameters"]
    assert glued["ch11_gpt_bits"] == pytest.approx(results["bits_per_character"], abs=1e-4)
    assert glued["ch11_train_minutes"] == pytest.approx(results["train_seconds"] / 60)
    _, text = page
    assert f"$ {recording['command']}" in text
    assert f"recorded {recording['date'][:10]} at commit {recording['commit'][:10]}" in text
    assert recording["hardware"]["capability"] in text
    # the first recorded sample is shown as it was recorded
    first_line = results["samples"][0]["text"].splitlines()[1]
    assert " ".join(first_line.split()) in " ".join(text.split())
    # "falls from ... at the start to ... at the end"
    assert glued["ch11_val_last"] < glued["ch11_val_first"]


def _bits(cell: str) -> list[float]:
    """The numbers of a table cell, e.g. 3.240 (3.230–3.252), 1,234 steps."""
    return [float(v.replace(",", "")) for v in re.findall(r"\d[\d,]*(?:\.\d+)?", cell)]


def sweep_scores() -> dict:
    """(family, budget) -> the three seeds' bits per character, from the recording."""
    results = read_recording("ch11-sweep")["results"]
    scores: dict = {}
    for run in results["runs"]:
        scores.setdefault((run["family"], run["budget"]), []).append(run["bits_per_character"])
    return scores


def test_comparison_table_is_the_recorded_sweep(page, glued):
    results = read_recording("ch11-sweep")["results"]
    rows = table(page, "model")
    budgets = results["budgets"]
    assert rows[0][2:] == [f"{b / 1e12:g} TFLOP" for b in budgets]
    cells = {row[0]: row for row in rows[1:]}
    assert list(cells) == ["bigram counts", "RNN", "GRU", "GPT"]
    assert _bits(cells["bigram counts"][2])[0] == pytest.approx(glued["ch11_bigram_bits"], abs=5e-4)
    scores = sweep_scores()
    for family in ("RNN", "GRU", "GPT"):
        for budget, cell in zip(budgets, cells[family][2:], strict=True):
            seeds = scores[family, budget]
            assert len(seeds) == 3
            mean, low, high, steps = _bits(cell)
            assert mean == pytest.approx(np.mean(seeds), abs=5e-4)
            assert (low, high) == pytest.approx((min(seeds), max(seeds)), abs=5e-4)
            runs = [r for r in results["runs"] if (r["family"], r["budget"]) == (family, budget)]
            assert steps == runs[0]["steps"]
            # equal compute: steps x tokens x FLOPs per token is the budget, to one step
            per_step = runs[0]["flops_per_token"] * results["batch_size"] * results["context"]
            assert abs(steps * per_step - budget) <= per_step
    # "the recurrent models are ahead ... every GPT seed is behind every seed of both
    # recurrent families at every budget"; the GPT catches up with the bigram after the first
    bigram = glued["ch11_bigram_bits"]
    gaps = []
    for budget in budgets:
        recurrent = scores["RNN", budget] + scores["GRU", budget]
        assert max(recurrent) < min(scores["GPT", budget]) and max(recurrent) < bigram
        gaps.append(
            np.mean(scores["GPT", budget]) - min(np.mean(scores[f, budget]) for f in ("RNN", "GRU"))
        )
    assert np.mean(scores["GPT", budgets[0]]) > bigram > max(scores["GPT", budgets[1]])
    # "the gap closes fast ... shrinks from ... to ..."
    assert gaps == sorted(gaps, reverse=True)
    assert glued["ch11_sweep_gap_low"] == pytest.approx(gaps[0])
    assert glued["ch11_sweep_gap_high"] == pytest.approx(gaps[-1])
    _, text = page
    flat = " ".join(text.split())
    assert "At every budget the recurrent models are ahead" in flat
    assert f"the GPT {glued['ch11_sweep_gpt_high']:.3f}, and every GPT seed is behind" in flat
    # equal time is measured from each family's step time, recorded with the sweep
    assert set(results["step_ms"]) == {"RNN", "GRU", "GPT"}


def test_sampling_controls(page, glued):
    rows = table(page, "setting")
    measured = {row[0]: (float(row[1]), _bits(row[2])) for row in rows[1:]}
    entropy = {key: glued[f"ch11_entropy_{key}"] for key in ("t1", "t05", "t15", "k5", "p09")}
    assert entropy["t05"] < entropy["t1"] < entropy["t15"]  # "lowers", "raises"
    assert glued["ch11_kept_t1"] == 82  # "all characters stay possible"
    assert glued["ch11_kept_k5"] == 5
    assert glued["ch11_kept_p05"] < glued["ch11_kept_p09"]
    assert glued["ch11_kept_p09_min"] < glued["ch11_kept_p09_max"]  # "small ... and large"
    assert measured["top-p, p = 0.9"][1] == pytest.approx(
        [glued["ch11_kept_p09"], glued["ch11_kept_p09_min"], glued["ch11_kept_p09_max"]],
        abs=0.05,
    )
    assert measured["τ = 1"][0] == pytest.approx(entropy["t1"], abs=0.005)
    # "the code treats τ = 0 as that limit, taking the argmax"
    logits = torch.randn(16, 82, generator=torch.Generator().manual_seed(0))
    assert torch.equal(next_token(logits, temperature=0), logits.argmax(-1, keepdim=True))
    cold = next_token(logits, temperature=1e-4, generator=torch.Generator().manual_seed(0))
    assert torch.equal(cold, next_token(logits, temperature=0))  # "as τ → 0"


def test_diagram_labels_are_plain_text():
    """Graphviz shows labels as they are: no TeX subscripts such as x_{T-1}."""
    source = (BOOK_DIR / f"{PAGE}.md").read_text(encoding="utf-8")
    diagrams = re.findall(r"```\{graphviz\}(.*?)```", source, flags=re.DOTALL)
    assert diagrams
    assert not any(re.search(r"[_^]\{", diagram) for diagram in diagrams)


def test_held_out_windows(page, glued):
    """The split and the held-out windows the prose describes are the ones the code made."""
    _, text = page
    # "the first 90 % to train.bin and the last 10 %": prepare's default split, measured
    val_fraction = inspect.signature(prepare).parameters["val_fraction"].default
    assert glued["ch11_val_pct"] == pytest.approx(100 * val_fraction, abs=0.1)
    assert glued["ch11_train_pct"] == pytest.approx(100 - glued["ch11_val_pct"])
    split = f"the first {glued['ch11_train_pct']:.0f} % to train.bin and the last"
    assert split in " ".join(text.split())
    # each window: the model reads its first block_size characters, scores the rest
    block = CONFIGS["shakespeare-char-cpu"]["block_size"]
    assert glued["ch11_window_read"] == glued["ch11_window"] - 1 == block
    predictions = int(re.search(r"([\d,]+) held-out predictions", text)[1].replace(",", ""))
    assert predictions == glued["ch11_val_windows"] * glued["ch11_window_read"]
    assert glued["ch11_ablation_windows"] == glued["ch11_val_windows"] // 2  # "first half"
    # the GPT's MLP: "widened 4 times", as the parameter formula's 12 d^2 assumes
    config = GPTConfig(n_embd=16)
    assert glued["ch11_mlp_widening"] == GPT_MLP(config).fc.out_features // 16


def test_kv_cache(page, glued):
    assert glued["ch11_cache_speedup"] > 1  # "faster with the cache"
    assert glued["ch11_cache_tokens"] == CONFIGS["shakespeare-char-cpu"]["block_size"] - 1
    _, text = page
    assert "100 tokens with and without the cache identical: True" in text


def test_inside_the_model(page, glued):
    _, text = page
    lines = re.findall(r"block (\d): entropy ([\d. ]+) nats; distance ([\d. ]+)", text)
    assert [int(b) for b, _, _ in lines] == [1, 2, 3, 4]
    entropies = [float(v) for _, e, _ in lines for v in e.split()]
    distances = [[float(v) for v in d.split()] for _, _, d in lines]
    assert len(entropies) == 16
    assert glued["ch11_entropy_low"] == pytest.approx(min(entropies), abs=0.006)
    assert glued["ch11_entropy_high"] == pytest.approx(max(entropies), abs=0.006)
    assert glued["ch11_entropy_high"] <= glued["ch11_max_entropy"]
    assert glued["ch11_max_entropy"] == pytest.approx(np.mean(np.log(np.arange(1, 65))))
    means = [np.mean(entropies[4 * b : 4 * b + 4]) for b in range(4)]
    assert glued["ch11_maps_block"] == 1 + int(np.argmin(means))  # "the lowest mean entropy"
    assert glued["ch11_distance_first"] == pytest.approx(np.mean(distances[0]), abs=0.06)
    # An even spread over the t + 1 visible characters looks back t / 2 on average.
    assert glued["ch11_uniform_distance"] == pytest.approx(np.mean(np.arange(64) / 2))
    # "well below that maximum: already block 1 picks out a few characters, most of its
    # heads the last two or three"
    assert glued["ch11_entropy_first_low"] == pytest.approx(min(entropies[:4]), abs=0.006)
    assert glued["ch11_entropy_first_high"] == pytest.approx(max(entropies[:4]), abs=0.006)
    assert glued["ch11_entropy_first_high"] < glued["ch11_max_entropy"] - 0.5
    assert sorted(distances[0])[1] < 3.5  # three of four heads: about 2-3 characters back
    assert "already block 1 picks out a few characters" in " ".join(text.split())
    assert glued["ch11_distance_last"] == pytest.approx(np.mean(distances[-1]), abs=0.06)
    low, high = glued["ch11_ablation_min"], glued["ch11_ablation_max"]
    assert low <= high and high > 0  # silencing the most valuable head costs something
    # "the heads that matter most are the short-sighted ones of the first block"
    head, block = glued["ch11_ablation_worst_head"], glued["ch11_ablation_worst_block"]
    assert f"the most valuable is head {head} of block {block}." in " ".join(text.split())
    assert block == 1 and distances[0][head - 1] < glued["ch11_uniform_distance"] / 4
    found = re.search(r"silencing one head adds ([+-][\d.]+) to ([+-][\d.]+)", text)
    assert float(found[1]) == pytest.approx(low, abs=5e-4)
    assert float(found[2]) == pytest.approx(high, abs=5e-4)
    # the ablation scores "the first half" of the held-out windows, and its base is on those
    predictions = int(re.search(r"([\d,]+) held-out predictions", text)[1].replace(",", ""))
    assert glued["ch11_ablation_windows"] == predictions // 64 // 2
    assert "(the head ablation, to save time, on the first half of them)" in " ".join(text.split())
    assert f"with every head: {glued['ch11_base_bits']:.3f} bits per character" in text


def test_influence_by_distance(glued):
    assert glued["ch11_context"] == CONFIGS["shakespeare-char-cpu"]["block_size"]
    # "the GPT reads the last 64 of them; the RNN reads all 96"
    assert glued["ch11_influence_chars"] > glued["ch11_context"]
    assert glued["ch11_influence_windows"] == len(range(0, glued["ch11_val_windows"], 8))
    assert glued["ch11_influence_gpt_beyond"] == 0.0  # "exactly 0 beyond the context"
    assert glued["ch11_influence_gpt_min_inside"] > 0  # "never less than ..." (and above 0)
    assert glued["ch11_influence_gpt_1"] >= glued["ch11_influence_gpt_min_inside"]
    # "still ..., where the RNN's has faded to ..."
    assert glued["ch11_influence_rnn_far"] < glued["ch11_influence_gpt_far"]


def test_same_logits_as_gpt2(page, glued):
    assert glued["ch11_gap_hf"] <= 1e-4
    assert glued["ch11_gpt2_small"] == pytest.approx(parameter_count(50257, 1024, 12, 768) / 1e6)
    assert round(glued["ch11_gpt2_small"]) == 124  # "the 124 million usually quoted"
    _, text = page
    found = re.search(r"parameters: transformers ([\d,]+), parameter_count ([\d,]+)", text)
    assert found[1] == found[2]


SOLVED = ("ch08_self_attention", "ch09_transformer", "ch11_gpt")
"""the chapters whose solutions stand in for the learner's notebooks"""


def test_your_own_gpt_trains_like_the_reference_and_check_names_the_bug(page, glued):
    _, text = page
    flat = " ".join(text.split())
    solved = [part for assignment in SOLVED for part in parts_of(assignment)]
    assert glued["ch11_own_yours"] == len(solved)  # every part of the three chapters
    assert f"{len(solved)} of {len(PARTS)} are yours" in flat
    # "the curves coincide", not to the last bit, and rounding differences grow a little
    assert 0 < glued["ch11_own_gap"] <= 1e-3
    assert "the curves coincide" in flat
    assert "is the text the reference\u2019s sampler gives from the same model and seed" in flat
    assert glued["ch11_own_forward_gap"] <= 1e-5  # float32 rounding of the logits
    assert glued["ch11_own_forward_gap"] < glued["ch11_own_gap"]
    shown = re.search(r"yours - reference: (\d\.\de[+-]\d+)", flat)
    assert float(shown[1]) == pytest.approx(glued["ch11_own_gap"], rel=0.05)
    # the sampler is the learner's and gives the reference's text
    assert "same model and seed, gives the same text: True" in flat
    # the bug: check names the part and exits 1; the others agree; training departs
    assert "$ mini-llm learner check buggy (exit status 1)" in flat
    assert flat.count("DEVIATES") == 1
    assert re.search(
        r"ch08_self_attention\.scaled_dot_product_attention present visible tests fail: "
        r"[^|]*\| DEVIATES: max \|yours - reference\| = \S+, on probe \d+ at the GPT's shapes",
        flat,
    )
    assert (
        "first part that deviates: ch08_self_attention.scaled_dot_product_attention "
        "(max |yours - reference| = " in flat
    )
    left_out = re.search(r"left out: (\d+) lines of parts that agree", flat)
    # "every other part that check compares agrees (the classes ... visible tests only)"
    not_compared = flat.count("not compared")
    assert not_compared >= 2  # Block and GPT at least
    assert int(left_out[1]) + not_compared == len(solved) - 1
    assert glued["ch11_own_bug_gap"] > 10 * glued["ch11_own_gap"]
    assert glued["ch11_own_bug_ratio"] == pytest.approx(
        glued["ch11_own_bug_gap"] / glued["ch11_own_gap"]
    )
    bug_shown = re.search(r"training losses with the bug: ([\d.]+)", flat)
    assert float(bug_shown[1]) == pytest.approx(glued["ch11_own_bug_gap"], abs=5e-4)


def test_the_try_it_commands_are_valid(page):
    """The shell block of "Your own GPT": each command parses, and train's overrides are keys of
    the config (the block is shown, not run)."""
    source = (BOOK_DIR / f"{PAGE}.md").read_text(encoding="utf-8")
    section = source.split("## Your own GPT", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, flags=re.DOTALL)[1]
    commands = [
        shlex.split(line.partition("#")[0]) for line in block.replace("\\\n", " ").splitlines()
    ]
    actions = []
    for words in commands:
        assert words[0] == ".venv/bin/mini-llm", words
        args = build_parser().parse_args(words[1:])
        actions.append(" ".join(words[1:3]))
        if args.command == "train":
            resolve(DEFAULT_CONFIG, args.overrides)  # an unknown key raises
    assert actions[:2] == ["learner export", "learner check"]
    assert sum("--learner" in words for words in commands) == 2  # train and sample
    _, text = page
    shown = " ".join(text.split())
    assert all(" ".join(line.split()) in shown for line in block.splitlines())

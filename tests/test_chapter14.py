"""Chapter 14's rendered page: its counts are the examples' and the formula's, and every
comparison its prose makes of the recorded runs holds when recomputed here from the results
file, not from the page's own code. The kept adapter is re-verified: it loads, and merging it
leaves the logits as they were."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from _book_helpers import glued_fixture, page_fixture, shown

from mini_llm import instruct, lora
from mini_llm.engine.recorded import MAX_CHECKPOINT_BYTES, checkpoint_path, read_recording
from mini_llm.experiments import ch14_adapt

page = page_fixture("ch14_adapting_gpt")
glued = glued_fixture("ch14_adapting_gpt", in_prose=False)


@pytest.fixture(scope="module")
def recording():
    return read_recording(ch14_adapt.NAME)


def _runs(results, method, rank=None):
    return [r for r in results["runs"] if r["method"] == method and r["rank"] == rank]


def _mean(runs, task="all", measure="response_bpc"):
    return float(np.mean([r["test"][task][measure] for r in runs]))


def test_the_examples_are_split_without_overlap(page, glued, recording):
    train, held_out = instruct.instruction_split()
    tuning, test = ch14_adapt.split_held_out(held_out)
    assert shown(page, glued, "ch14_n_train", ",") == len(train)
    assert shown(page, glued, "ch14_n_tuning", ",") == len(tuning)
    assert shown(page, glued, "ch14_n_test", ",") == len(test)
    assert recording["results"]["examples"] == {
        "train": len(train), "tuning": len(tuning), "test": len(test)}  # fmt: skip
    assert not {e.lines for e in train} & {e.lines for e in held_out}
    share = shown(page, glued, "ch14_response_share", ".0f")
    responses = sum(len(e.response) for e in train)
    assert share == pytest.approx(100 * responses / sum(len(e.text) - 1 for e in train))
    assert share < 20  # "only ... % of the target positions are response characters"
    _, text = page
    trained = re.search(r"(\d+) of (\d+) positions are trained", text)
    assert trained and int(trained[1]) == len(train[1].response)


def test_the_lora_counts_follow_the_formula(page, glued, recording):
    base = ch14_adapt.base_model()
    full = shown(page, glued, "ch14_full_count", ",")
    assert full == lora.trainable_parameters(base) == recording["results"]["base_parameters"]
    _, text = page
    for rank in ch14_adapt.RANKS:
        count = 16 * base.config.n_layer * rank * base.config.n_embd
        assert count == lora.lora_parameter_count(base.config, rank)
        assert f"{count:,}" in text
    assert shown(page, glued, "ch14_r1_share", ".1f") == pytest.approx(
        100 * lora.lora_parameter_count(base.config, 1) / full
    )


def test_the_kept_adapter_loads_and_merges_to_the_same_logits(page, glued, recording):
    path = checkpoint_path(recording, "adapter")
    assert path.stat().st_size <= MAX_CHECKPOINT_BYTES
    model = ch14_adapt.adapted_model(recording["results"]["kept_rank"], path)
    tokenizer = instruct.shakespeare_tokenizer()
    inputs = torch.tensor([tokenizer.encode("Who speaks: To be, or not to be\nHAMLET\n")])
    with torch.no_grad():
        before = model(inputs)[0]
        after = lora.merge_lora(model)(inputs)[0]
        plain = ch14_adapt.base_model()(inputs)[0]
    assert (after - before).abs().max() < 1e-4
    assert (after - plain).abs().max() > 0.1  # the adapter does change the model
    _, text = page
    change = re.search(r"largest change of a logit after merging: ([\d.e+-]+)", text)
    assert change and float(change[1]) < 1e-4
    rescored = re.search(r"on the test half: ([\d.]+) bits .*?\(recorded ([\d.]+)\)", text)
    assert rescored and rescored[1] == rescored[2]
    kept_rank = recording["results"]["kept_rank"]
    kept = [r for r in _runs(recording["results"], "lora", kept_rank) if r["seed"] == 0]
    assert float(rescored[2]) == pytest.approx(kept[0]["test"]["all"]["response_bpc"], abs=1e-4)


def test_the_recorded_comparison_says_what_the_runs_show(page, glued, recording):
    results = recording["results"]
    ranks = results["ranks"]
    base = results["base_run"]["test"]["all"]["response_bpc"]
    assert shown(page, glued, "ch14_base_bpc", ".2f") == pytest.approx(base)
    for method, rank in [("full", None)] + [("lora", r) for r in ranks]:
        runs = _runs(results, method, rank)
        assert sorted(r["seed"] for r in runs) == [0, 1, 2]  # three seeds each
        assert len({r["lr"] for r in runs}) == 1  # the chosen rate, for every seed
        # the chosen rate is inside the grid searched, not at its edge
        grid = results["learning_rates"][method]
        assert grid[0] < runs[0]["lr"] < grid[-1]
        assert all(base - r["test"]["all"]["response_bpc"] > 1.5 for r in runs)
    full, kept = _runs(results, "full"), _runs(results, "lora", results["kept_rank"])
    assert shown(page, glued, "ch14_full_bpc", ".2f") == pytest.approx(_mean(full))
    assert shown(page, glued, "ch14_kept_bpc", ".2f") == pytest.approx(_mean(kept))
    recovered = (base - _mean(kept)) / (base - _mean(full))
    assert shown(page, glued, "ch14_recovered", ".0f") == pytest.approx(100 * recovered)
    assert recovered > 0.8  # "most of full fine-tuning's improvement"
    lora_means = [_mean(_runs(results, "lora", r)) for r in ranks]
    assert shown(page, glued, "ch14_r1_bpc", ".2f") == pytest.approx(lora_means[0])
    assert shown(page, glued, "ch14_r16_bpc", ".2f") == pytest.approx(lora_means[-1])
    assert lora_means[-1] < lora_means[0] < lora_means[-1] + 0.2  # "helps a little"
    assert _mean(full) < min(lora_means)  # "full fine-tuning is ahead of every rank"
    spread = [np.ptp([r["test"]["all"]["response_bpc"] for r in _runs(results, "lora", k)])
              for k in ranks]  # fmt: skip
    full_spread = np.ptp([r["test"]["all"]["response_bpc"] for r in full])
    assert shown(page, glued, "ch14_full_range", ".2f") == pytest.approx(full_spread)
    assert shown(page, glued, "ch14_lora_range", ".2f") == pytest.approx(max(spread))
    assert full_spread > 2 * max(spread)
    first_full = _mean(full, "first", "exact_match")
    first_lora = max(_mean(_runs(results, "lora", r), "first", "exact_match") for r in ranks)
    assert shown(page, glued, "ch14_full_first", ".0f") == pytest.approx(100 * first_full)
    assert shown(page, glued, "ch14_lora_first", ".0f") == pytest.approx(100 * first_lora)
    assert first_full > 2 * first_lora
    speaker = max(r["test"]["speaker"]["exact_match"] for r in results["runs"])
    assert shown(page, glued, "ch14_speaker_best", ".1f") == pytest.approx(100 * speaker)
    assert speaker < 0.01  # "no run names the speaker"


def test_lora_answers_the_common_word_and_generalises_to_unread_lines(page, glued):
    assert "'And\\n'" in page[1]  # "It answers \"And\""
    assert shown(page, glued, "ch14_common_said", ".0f") > 50
    assert glued["ch14_common_right"] < 20
    assert shown(page, glued, "ch14_read_share", ".0f") > 50  # "most test lines"
    assert shown(page, glued, "ch14_unread_gap", ".2f") > 0
    assert shown(page, glued, "ch14_unread_gain", ".2f") > 1.5
    _, text = page
    assert "A closer look: choosing the learning rates" in text

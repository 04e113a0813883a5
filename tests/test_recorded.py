"""Recorded runs stay honest: every experiment records end to end at a tiny size through
`mini-llm record`, a damaged or foreign results file is refused naming the file, a smoke test
never passes for a result, and the committed checkpoints give back the losses recorded with
them."""

import json

import pytest

from mini_llm import cli
from mini_llm.engine import recorded
from mini_llm.engine.recorded import RecordingError, read_recording
from mini_llm.experiments import experiments
from mini_llm.experiments.shakespeare import (
    bits_per_character,
    held_out_windows,
    shakespeare_splits,
)

EXPERIMENTS = experiments()


@pytest.fixture(scope="module")
def shakespeare():
    return shakespeare_splits()


@pytest.mark.slow  # trains every experiment at its tiny size (make check leaves it out)
@pytest.mark.parametrize("name", list(EXPERIMENTS))
def test_every_experiment_records_end_to_end_at_a_tiny_size(name, tmp_path, capsys):
    assert cli.main(["record", name, "--tiny", "--out", str(tmp_path)]) == 0
    assert str(tmp_path / f"{name}.json") in capsys.readouterr().out
    with pytest.raises(RecordingError, match="tiny smoke-test"):
        read_recording(name, tmp_path)
    recording = read_recording(name, tmp_path, allow_tiny=True)
    assert recording["command"] == f"mini-llm record {name} --tiny"
    assert recording["hardware"]["device"] == "cpu"
    assert recording["hardware"]["capability"]
    assert recording["results"], "an experiment that measured nothing"
    for file in recording["checkpoints"].values():
        size = (tmp_path / file).stat().st_size
        assert 0 < size <= recorded.MAX_CHECKPOINT_BYTES


def test_a_tiny_run_may_not_write_into_book_results(capsys):
    assert cli.main(["record", "ch11-gpt-cpu", "--tiny"]) == 2
    assert "smoke test" in capsys.readouterr().err


def test_an_unknown_experiment_is_refused_with_the_known_ones(capsys):
    assert cli.main(["record", "ch99-nothing", "--out", "/nonexistent"]) == 2
    err = capsys.readouterr().err
    assert "unknown experiment 'ch99-nothing'" in err and "ch11-gpt-cpu" in err


@pytest.mark.parametrize(
    "content, message",
    [
        ('{"schema": 99, "name": "x"}', "has schema 99, not 1"),
        ("{not json", "not a readable JSON recording"),
        ('{"schema": 1, "name": "x"}', "lacks command, commit"),
        ("[1, 2]", "has schema None"),
    ],
)
def test_a_foreign_or_damaged_results_file_is_refused_naming_it(tmp_path, content, message):
    (tmp_path / "x.json").write_text(content)
    with pytest.raises(RecordingError, match=message) as caught:
        read_recording("x", tmp_path)
    assert str(tmp_path / "x.json") in str(caught.value)


def test_a_missing_recording_says_how_to_make_it(tmp_path):
    with pytest.raises(RecordingError, match="mini-llm record ch11-gpt-cpu"):
        read_recording("ch11-gpt-cpu", tmp_path)


def test_a_recording_of_another_name_is_refused(tmp_path):
    good = read_recording("ch11-gpt-cpu")
    (tmp_path / "other.json").write_text(json.dumps(good))
    with pytest.raises(RecordingError, match="records 'ch11-gpt-cpu', not 'other'"):
        read_recording("other", tmp_path)


def test_the_committed_gpt_checkpoint_gives_back_its_recorded_loss(shakespeare):
    from mini_llm.experiments.ch11_gpt_cpu import trained_model

    recording = read_recording("ch11-gpt-cpu")
    results = recording["results"]
    tokenizer, _, val_ids = shakespeare
    assert tokenizer.vocab_size == results["model_config"]["vocab_size"]
    model = trained_model(results, recorded.checkpoint_path(recording, "model"))
    windows = held_out_windows(val_ids)
    assert list(windows.shape) == results["held_out_windows"]
    assert abs(bits_per_character(model, windows) - results["bits_per_character"]) <= 1e-4
    assert model.num_parameters() == results["parameters"]


def test_the_committed_lora_adapter_gives_back_its_recorded_scores():
    """Chapter 14's kept adapter, on the base GPT, scores the first-word test examples as
    recorded (one task of three: the whole test half is the page's check)."""
    from mini_llm import instruct
    from mini_llm.experiments import ch14_adapt

    recording = read_recording(ch14_adapt.NAME)
    results = recording["results"]
    model = ch14_adapt.adapted_model(
        results["kept_rank"], recorded.checkpoint_path(recording, "adapter")
    )
    _, held_out = instruct.instruction_split()
    _, test = ch14_adapt.split_held_out(held_out)
    first = [e for e in test if e.task == "first"]
    scores = instruct.evaluate(model, first, instruct.shakespeare_tokenizer())
    (kept,) = [
        r for r in results["runs"]
        if r["method"] == "lora" and r["rank"] == results["kept_rank"] and r["seed"] == 0
    ]  # fmt: skip
    assert scores["exact_match"] == kept["test"]["first"]["exact_match"]
    assert abs(scores["response_bpc"] - kept["test"]["first"]["response_bpc"]) <= 1e-4


def test_a_checkpoint_of_another_shape_is_refused_naming_the_file(tmp_path):
    from mini_llm.gpt import GPT, GPTConfig

    recording = read_recording("ch11-gpt-cpu")
    path = recorded.checkpoint_path(recording, "model")
    other = GPT(GPTConfig(vocab_size=7, n_layer=1, n_head=1, n_embd=8, block_size=8))
    with pytest.raises(RecordingError, match="does not hold this model's weights") as caught:
        recorded.load_weights(other, path)
    assert str(path) in str(caught.value)


@pytest.mark.parametrize("family", ["RNN", "GRU"])
def test_the_sweeps_recurrent_checkpoints_give_back_their_recorded_loss(shakespeare, family):
    """The page opens up the sweep's seed-0 recurrent models of the largest budget."""
    from mini_llm.experiments.ch11_sweep import build

    recording = read_recording("ch11-sweep")
    results = recording["results"]
    tokenizer, _, val_ids = shakespeare
    model = build(family, tokenizer.vocab_size, results["sizes"])
    recorded.load_weights(model, recorded.checkpoint_path(recording, family))
    (run,) = [
        r
        for r in results["runs"]
        if r["family"] == family and r["budget"] == results["budgets"][-1] and r["seed"] == 0
    ]
    bits = bits_per_character(model, held_out_windows(val_ids))
    assert abs(bits - run["bits_per_character"]) <= 1e-4

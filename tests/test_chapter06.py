"""Chapter 6's rendered page: the cells equal PyTorch's, the parameter counts follow the gate
counts, and the memory experiment (three seeds) shows what the prose says about it."""

from __future__ import annotations

import math
import re

import torch
from _book_helpers import glued_fixture, html_tables, page_fixture

from mini_llm.lstm import SequenceClassifier, first_token_task

SEEDS = (0, 1, 2)
IDENTITY = "RNN, W_hh = identity"
NOBIAS = "LSTM, forget bias not raised"
SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


page = page_fixture("ch06_lstm")
glued = glued_fixture("ch06_lstm")


def readable(x: float) -> str:
    """How the prose writes a gradient ratio: 0.23, or 5 × 10⁻⁹ below 0.01."""
    if x >= 0.01:
        return f"{x:.2f}"
    mantissa, exponent = f"{x:.0e}".split("e")
    return f"{mantissa} × 10{str(int(exponent)).translate(SUPERSCRIPT)}"


def flat(text: str) -> str:
    """The text on one line, with the typographic apostrophes of the rendered prose as '."""
    return " ".join(text.replace("\u2019", "'").split())


def table(raw: str, first_column: str) -> tuple[list[str], dict[str, list[str]]]:
    for rows in html_tables(raw):
        if rows and rows[0][0] == first_column:
            return rows[0], {row[0]: row[1:] for row in rows[1:]}
    raise AssertionError(f"no table with first column {first_column!r}")


def seeds(cell: str) -> list[float]:
    """'100%, 25%, 75%' -> [1.0, 0.25, 0.75]: one accuracy per seed."""
    values = [float(v.strip().rstrip("%")) / 100 for v in cell.split(",")]
    assert len(values) == len(SEEDS), cell
    return values


def test_hand_written_cells_equal_pytorch(page):
    _, text = page
    for name in ("torch.nn.LSTMCell", "torch.nn.LSTM", "torch.nn.GRUCell"):
        value = re.search(rf"largest difference from {re.escape(name)}:\s+([\d.e+-]+)", text)
        assert value and float(value.group(1)) < 1e-12, name


def test_parameter_counts_follow_the_number_of_gate_blocks(page, glued):
    raw, text = page
    _, rows = table(raw, "cell")
    counts = {name: int(row[0].replace(",", "")) for name, row in rows.items()}
    D, H = 16, 64
    rnn = H * D + H * H + 2 * H  # W_ih, W_hh and the two bias vectors
    assert counts == {"RNN": rnn, "LSTM": 4 * rnn, "GRU": 3 * rnn}
    # "the GRU has 3 times and the LSTM 4 times the recurrent weights": read off the table
    assert glued["ch06_gru_ratio"] == f"{counts['GRU'] / counts['RNN']:g}"
    assert glued["ch06_lstm_ratio"] == f"{counts['LSTM'] / counts['RNN']:g}"
    ratios = f"{glued['ch06_gru_ratio']} times and the LSTM {glued['ch06_lstm_ratio']} times"
    assert ratios in flat(text)


def test_gated_networks_remember_where_the_plain_rnn_cannot_over_three_seeds(page, glued):
    raw, text = page
    header, rows = table(raw, "network")
    assert header[1:] == [f"accuracy, length {n} (seeds 0, 1, 2)" for n in (10, 30)]
    short = {name: seeds(row[0]) for name, row in rows.items() if row[0]}
    long = {name: seeds(row[1]) for name, row in rows.items()}
    assert set(short) == {"RNN", "LSTM", "GRU"}
    assert all(min(values) > 0.95 for values in short.values())  # every network, every seed
    lengths = [int(re.search(r"length (\d+)", cell)[1]) for cell in header[1:]]
    assert [glued["ch06_short"], glued["ch06_long"]] == [str(n) for n in lengths]
    assert f"length {lengths[0]} all three networks succeed with every seed" in flat(text)
    assert min(long["LSTM"]) > 0.95 and min(long["GRU"]) > 0.95  # "almost every time"
    rnn = long["RNN"]
    near_chance = sum(v < 0.3 for v in rnn)
    assert near_chance == 2  # "mostly stays near chance"; the caption: "one of the three"
    assert max(rnn) < 0.95  # "its best run reaches only ..."
    assert max(long[NOBIAS]) < 0.3  # "with any seed"
    # the RNN started from the identity: "no seed learns the dependency fully: two of the
    # three runs stay near chance, and the best reaches ..." (the page asserts it too)
    identity = long[IDENTITY]
    assert max(identity) < 0.95 and sum(v < 0.3 for v in identity) == 2
    assert glued["ch06_identity_best"] == f"{max(identity):.0%}"
    best = glued["ch06_identity_best"]
    assert f"two of the three runs stay near chance, and the best reaches {best}" in flat(text)
    assert f"{best} (seeds 0, 1, 2: {rows[IDENTITY][1]})" in flat(text)
    # the caption of the training curves: "one of the three RNNs started from the identity
    # leaves it early, but also only part of the way"
    assert sum(v >= 0.3 for v in identity) == 1 and max(identity) < 0.95
    prose = flat(text)
    assert (
        "stays near chance in two of the three runs, and its best run reaches "
        f"only {max(rnn):.0%} (seeds 0, 1, 2: {rows['RNN'][1]})"
    ) in prose
    assert f"the LSTM ({rows['LSTM'][1]}) and the GRU ({rows['GRU'][1]})" in prose
    assert f"with any seed ({rows['LSTM, forget bias not raised'][1]})" in prose
    trained = len(SEEDS) * (len(short) + len(long))
    assert f"{trained} networks trained in" in text and "chance is 25%" in text
    assert "name the first token of a sequence of 30 tokens, after the 29 distracting" in prose
    assert "Guessing gives 25%" in prose and "400 AdamW steps of 64 fresh sequences" in prose
    bias = float(glued["ch06_remember_bias"])
    assert glued["ch06_remember_share"] == f"{1 / (1 + math.exp(-bias)):.2f}"
    assert f"raised by {glued['ch06_remember_bias']}, so that at first they keep about" in prose


def test_the_lstm_without_the_raised_bias_starts_at_about_half_memory(page):
    """The prose: that LSTM's forget gate starts at about σ(0) = 0.5, because its biases start
    small and random. Rebuilt as the page builds it (same seeds and sizes), at its first step."""
    prose = flat(page[1])
    assert "LSTM whose forget gate started at about" in prose
    assert "(its biases start small and random), halving its memory at each step" in prose
    hidden = 64
    x, _ = first_token_task(512, 30, 4, torch.Generator().manual_seed(99))
    for seed in SEEDS:
        torch.manual_seed(seed)
        model = SequenceClassifier("lstm", 8, 4, 16, hidden, remember_bias=0.0)
        forget = slice(hidden, 2 * hidden)  # the second block of (i, f, g, o)
        bias = (model.b_ih + model.b_hh)[forget].detach()
        assert bias.abs().max() <= 2 / math.sqrt(hidden)  # small: PyTorch's ±1/√H, twice
        with torch.no_grad():  # the first step, from h0 = 0
            gate = torch.sigmoid(model.embedding(x[:, 0]) @ model.W_ih[forget].T + bias)
        assert abs(gate.mean().item() - 0.5) < 0.05  # "about 0.5"


def test_few_test_sequences_also_occurred_in_training(page):
    _, text = page
    repeats = {
        int(n): int(k)
        for n, k in re.findall(
            r"length (\d+): (\d+) of the 1,000 test sequences also occurred in training", text
        )
    }
    assert set(repeats) == {10, 30}
    assert repeats[30] == 0
    # "too few to explain an accuracy far above chance": recalling every repeated sequence and
    # guessing the rest would score far below what every network scores at length 10
    _, rows = table(page[0], "network")
    recall_only = repeats[10] / 1000 + 0.25 * (1 - repeats[10] / 1000)
    assert all(min(seeds(rows[name][0])) > recall_only + 0.5 for name in ("RNN", "LSTM", "GRU"))
    assert (
        f"{repeats[10]} at length 10, too few to explain an accuracy far above chance, and "
        f"{repeats[30]} at length 30"
    ) in flat(text)


def reach_ratios(text: str) -> dict[str, tuple[list[float], list[float]]]:
    """The printed ratios: per network, (untrained, trained), one value per seed."""
    number = r"([\d.]+e[+-]\d+)"
    found = re.findall(
        rf"\n\s*([A-Z][^\n]*?)\s+{'  '.join([number] * 3)}\s+"
        rf"{'  '.join([number] * 3)}",
        text,
    )
    return {
        label.strip(): ([float(v) for v in values[:3]], [float(v) for v in values[3:]])
        for label, *values in found
    }


def test_gradient_reach_is_far_stronger_through_gates(page):
    _, text = page
    reach = reach_ratios(text)
    assert set(reach) == {"RNN", "LSTM", "GRU", NOBIAS, IDENTITY}
    rnn, nobias = reach["RNN"][0], reach[NOBIAS][0]
    assert max(rnn) < 1e-6  # "lost among the distractors' much larger gradients"
    for gated in ("LSTM", "GRU"):
        untrained = reach[gated][0]
        assert 1e-2 < min(untrained) and max(untrained) < 1  # "weaker, by a factor of tens"
        assert min(untrained) > 1e4 * max(rnn)  # "many orders of magnitude more"
    assert max(nobias) < 1e-2 * min(reach["LSTM"][0])  # "orders of magnitude below its twin"
    prose = flat(text)
    for label in ("RNN", "LSTM", "GRU", NOBIAS, IDENTITY):
        low, high = min(reach[label][0]), max(reach[label][0])
        assert f"between {readable(low)} and {readable(high)}" in prose, label
    gated_trained = min(reach["LSTM"][1] + reach["GRU"][1])
    rnn_trained = max(reach["RNN"][1])
    assert gated_trained > 100 * rnn_trained  # "more than a hundred times the plain RNN's best"
    assert (
        f"at least {readable(gated_trained)} of the last step's, more than a hundred times the "
        f"plain RNN's best ({readable(rnn_trained)})"
    ) in prose
    # the identity start: "a reach like the gated networks'", then "lost most of its reach"
    untrained, trained = reach[IDENTITY]
    assert min(untrained) > 1e-2 and min(untrained) > 1e4 * max(rnn)
    assert max(trained) < 1e-2 * min(untrained)
    assert f"between {readable(min(trained))} and {readable(max(trained))} after training" in (
        prose
    )


TRACE_ROWS = (
    "forget gate, mean over t >= 1",
    "input gate at t = 0",
    "input gate, mean over t >= 1",
    "cell state at the end",
)


def gate_traces(text: str) -> dict[int, tuple[int, dict[str, list[float]]]]:
    """The printed gate trace: per seed, (the chosen unit, each row's four class means)."""
    blocks = re.findall(
        r"seed (\d), unit (\d+), mean over the test sequences of each class\n(.*?)"
        r"(?=\nseed \d, unit|\nthe whole layer)",
        text,
        flags=re.DOTALL,
    )
    traces = {}
    for seed, unit, body in blocks:
        rows = {}
        for name in TRACE_ROWS:
            found = re.search(rf"{re.escape(name)}((?:[ \t]+-?\d+\.\d+){{4}})", body)
            assert found, f"seed {seed}: no row {name!r}"
            rows[name] = [float(v) for v in found[1].split()]
        traces[int(seed)] = (int(unit), rows)
    return traces


def layer_trace(text: str) -> dict[str, list[float]]:
    """The printed whole-layer lines, by their start: one value per seed."""
    rows = {}
    for key, line, number in (
        ("kept", r"first cell state kept, share of \|c_T\|", r"[\d.]+%"),
        ("raised", r"mean forget gate over t >= 1", r"[\d.]+"),
        ("not raised", r"the same, bias not raised", r"[\d.]+"),
    ):
        found = re.search(rf"\n\s*{line}((?:[ \t]+{number}){{3}})", text)
        assert found, f"no line {line!r}"
        values = found[1].split()
        rows[key] = [float(v[:-1]) / 100 if v.endswith("%") else float(v) for v in values]
    return rows


def test_the_gates_keep_the_class_in_how_they_are_set(page, glued):
    """The traced gates of the trained LSTMs: on each seed's chosen unit one class holds its
    forget gate near 1 and its cell state grows, another lets the gate fall; little of the
    first step's cell state survives on its own; the layer's forget gate stays near where
    the raised bias started it, and below one half without it."""
    _, text = page
    traces = gate_traces(text)
    assert set(traces) == set(SEEDS)
    chosen = {}
    for seed, (_, rows) in traces.items():
        forget, cell = rows["forget gate, mean over t >= 1"], rows["cell state at the end"]
        held = max(range(4), key=lambda k: abs(cell[k]))
        dropped = min(range(4), key=lambda k: forget[k])
        chosen[seed] = held, dropped
        assert forget[held] > 0.98 and abs(cell[held]) > 10, seed
        assert forget[dropped] < 0.8 and abs(cell[dropped]) < 1, seed
        later, first = rows["input gate, mean over t >= 1"], rows["input gate at t = 0"]
        assert later[held] > first[held], seed  # "open wider over the distractors"
    unit, rows = traces[0]
    held, dropped = chosen[0]
    assert glued["ch06_trace_unit"] == str(unit)
    assert [glued["ch06_trace_held"], glued["ch06_trace_dropped"]] == [str(held), str(dropped)]
    for name, row, k in (
        ("f_held", "forget gate, mean over t >= 1", held),
        ("f_dropped", "forget gate, mean over t >= 1", dropped),
        ("i0", "input gate at t = 0", held),
        ("ilater", "input gate, mean over t >= 1", held),
    ):
        assert glued[f"ch06_trace_{name}"] == f"{rows[row][k]:.3f}", name
    for name, k in (("c_held", held), ("c_dropped", dropped)):
        assert (
            abs(float(glued[f"ch06_trace_{name}"]) - abs(rows["cell state at the end"][k])) <= 0.051
        )
    prose = flat(text)
    assert (
        f"For class {held}, whose cell state ends largest, its forget gate averages "
        f"{glued['ch06_trace_f_held']} over the distractors"
    ) in prose
    assert (
        f"wider ({glued['ch06_trace_ilater']} on average) than at the class token itself "
        f"({glued['ch06_trace_i0']}), so its cell state grows to {glued['ch06_trace_c_held']}"
    ) in prose
    assert f"For class {dropped} its forget gate averages only {glued['ch06_trace_f_dropped']}" in (
        prose
    )
    layer = layer_trace(text)
    kept = layer["kept"]
    assert max(kept) < 0.01  # "little ... survives on its own"
    assert glued["ch06_trace_direct_max"] == f"{max(kept):.2%}"
    assert f"at most {glued['ch06_trace_direct_max']} of the size of the final cell state" in (
        prose
    )
    raised, not_raised = layer["raised"], layer["not raised"]
    start = 1 / (1 + math.exp(-float(glued["ch06_remember_bias"])))
    assert all(abs(v - start) < 0.05 for v in raised)  # "close to the 0.88 ... at the start"
    assert max(not_raised) < 0.5  # "below one half"
    for name, values in (("raised", raised), ("not_raised", not_raised)):
        low, high = glued[f"ch06_trace_forget_{name}_min"], glued[f"ch06_trace_forget_{name}_max"]
        assert [low, high] == [f"{min(values):.3f}", f"{max(values):.3f}"], name
        assert f"between {low} and {high}" in prose, name


def test_page_has_its_figures_diagrams_and_math(page):
    """Goals, summary, exercise link and non-empty figures are checked for every chapter in
    test_book.py; here, that this chapter's own figures, diagrams and equations are there."""
    raw, _ = page
    images = re.findall(r'<img[^>]+src="[^"]+\.png"', raw)
    assert len(images) >= 3, "curves, gradient reach and the traced gates"
    for name in ("curves", "reach", "gates"):
        assert f'id="fig-ch06-{name}"' in raw, name
    assert len(re.findall(r"<(?:object|img)[^>]+graphviz", raw)) >= 2, "LSTM and GRU diagrams"
    assert raw.count('class="math') >= 6

"""Chapter 5's rendered page: the checks against PyTorch pass, the RNN beats counting, and the
measurements show what the prose says (fading memory, vanishing/exploding gradients, clipping).
"""

from __future__ import annotations

import html
import re

import numpy as np
import pytest
import torch
from _book_helpers import check_figures, glued_fixture, html_tables, page_fixture

from mini_llm.corpus import load_text
from mini_llm.engine.train import TrainConfig
from mini_llm.ngram import count_bigrams
from mini_llm.rnn import RNNLanguageModel, rnn_step
from mini_llm.smoothing import add_k_probabilities
from mini_llm.tokenizer import CharTokenizer

PROMPT = "ROMEO:\n"


page = page_fixture("ch05_rnn")
glued = glued_fixture("ch05_rnn")


def number(pattern: str, text: str) -> float:
    match = re.search(pattern, text)
    assert match, f"not on the page: {pattern}"
    return float(match.group(1))


def table(raw: str, first_column: str) -> list[list[str]]:
    for rows in html_tables(raw):
        if rows and rows[0][0] == first_column:
            return rows[1:]
    raise AssertionError(f"no table with first column {first_column!r}")


def test_hand_written_rnn_equals_pytorch_and_bptt_equals_autograd(page):
    raw, text = page
    assert number(r"largest difference from torch\.nn\.RNNCell: ([\d.e+-]+)", text) < 1e-12
    assert number(r"largest difference from\s+torch\.nn\.RNN: ([\d.e+-]+)", text) < 1e-12
    rows = table(raw, "gradient")
    assert [row[0] for row in rows] == ["W_xh", "W_hh", "b_h", "h0"]
    assert all(float(row[2]) < 1e-12 for row in rows)


def test_model_size_and_the_bigram_yardstick_are_recomputed(page, glued):
    raw, text = page
    text_chars = load_text("shakespeare")
    tokenizer = CharTokenizer.from_text(text_chars)
    V, E, H = tokenizer.vocab_size, 32, 128
    parameters = V * E + H * E + H * H + H + H * V + V  # embedding, W_xh, W_hh, b_h, head
    assert f"{len(text_chars):,} characters, {V} distinct; {parameters:,} parameters" in text

    ids = tokenizer.encode_array(text_chars)
    split = int(0.9 * len(ids))
    counts = count_bigrams([ids[:split]], V)
    val = ids[split:]
    # both models score the same characters: every one after the first, up to the last whole
    # window of 64 (the block the RNN reads)
    scored = (len(val) - 1) // 64 * 64
    assert glued["ch05_n_scored"] == f"{scored:,}" and scored > 0.99 * len(val)
    best = min(
        -np.log(add_k_probabilities(counts, k)[val[:scored], val[1 : scored + 1]]).mean()
        for k in (1.0, 0.1, 0.01, 0.001)
    )
    rows = {row[0].split(" (")[0]: float(row[2]) for row in table(raw, "model")}
    assert rows["bigram counts"] == pytest.approx(best, abs=6e-4)
    assert rows["RNN"] < rows["bigram counts"] - 0.3
    assert "RNN (up to 64 characters of context, in its state)" in {
        row[0] for row in table(raw, "model")
    }
    # The two scores differ by about 1e-5 nats whether the bigram reads the same characters as
    # the RNN or the whole text, so the numbers cannot show it; the page's code must.
    assert "rnn_val, n_scored = loss_on_text(model, val_ids)" in text
    assert "previous, scored = val_ids[:n_scored], val_ids[1 : n_scored + 1]" in text
    assert "[previous, scored]" in text


def test_prose_states_the_glued_losses(page, glued):
    raw, text = page
    rows = {row[0].split(" (")[0]: float(row[2]) for row in table(raw, "model")}
    assert float(glued["ch05_bigram_val"]) == pytest.approx(rows["bigram counts"], abs=0.006)
    assert float(glued["ch05_rnn_val"]) == pytest.approx(rows["RNN"], abs=0.006)
    assert float(glued["ch05_margin"]) == pytest.approx(
        rows["bigram counts"] - rows["RNN"], abs=0.011
    )
    val, train_loss = map(
        float,
        re.search(
            r"validation loss ([\d.]+) nats per character; training loss over the last 50 steps "
            r"([\d.]+)",
            text,
        ).groups(),
    )
    assert abs(val - train_loss) < 0.1  # the caption: "the model does not overfit"


def generated_sample(raw: str) -> str:
    """The printed continuation of the prompt, as the page shows it."""
    outputs = [
        html.unescape(re.sub(r"<[^>]+>", "", block))
        for block in re.findall(
            r'<div class="output stream.*?<pre>(.*?)</pre>', raw, flags=re.DOTALL
        )
    ]
    samples = [out for out in outputs if out.startswith(PROMPT)]
    assert len(samples) == 1, "the sample is not on the page"
    # Lines too long for the page continue on the next one, indented by four spaces.
    return re.sub(r"\n    ", " ", samples[0].rstrip("\n"))[len(PROMPT) :]


def test_what_the_prose_says_about_the_sample_is_true(page, glued):
    """Recomputed from the printed sample: the share of real words, of lines that start with a
    capital, and that the model wrote no speaker name of its own (the prose says it did not)."""
    raw, _ = page
    sample = generated_sample(raw)
    assert 290 <= len(sample) <= 300  # 300 characters, less any whitespace lost in wrapping
    assert all(mark in sample for mark in ",:.")  # "punctuated with commas, colons and stops"
    play_words = set(re.findall(r"[a-z']+", load_text("shakespeare").lower()))
    words = re.findall(r"[a-z']+", sample.lower())
    real = sum(w in play_words for w in words) / len(words)
    assert glued["ch05_sample_real_words"] == f"{real:.0%}"
    assert real > 0.5  # the summary: "mostly real words"
    lines = [line for line in sample.splitlines() if line.strip()]
    capital = sum(line[0].isupper() for line in lines) / len(lines)
    assert glued["ch05_sample_capital_lines"] == f"{capital:.0%}" and capital >= 0.75
    speakers = [line for line in lines if re.fullmatch(r"[A-Z][A-Z' ]*:", line.strip())]
    assert glued["ch05_sample_speakers"] == len(speakers) == 0, speakers
    assert "speaker names in capitals" not in page[1]


def test_jacobian_product_runs_latest_step_first(page):
    """dh_T/dh_t = J_T ... J_{t+1} with J_s = diag(1 - h_s^2) W_hh, as the page writes it; the
    reversed order is a different matrix."""
    raw, _ = page
    assert r"J_T\, J_{T-1} \cdots J_{t+1}" in raw
    gen = torch.Generator().manual_seed(0)
    W_xh, W_hh = (
        torch.randn(4, 3, generator=gen, dtype=torch.float64),
        torch.randn(4, 4, generator=gen, dtype=torch.float64),
    )
    b_h = torch.randn(4, generator=gen, dtype=torch.float64)
    xs = torch.randn(3, 1, 3, generator=gen, dtype=torch.float64)
    h_t = torch.randn(1, 4, generator=gen, dtype=torch.float64)

    def run(h):
        states = []
        for x in xs:
            h = rnn_step(x, h, W_xh, W_hh, b_h)
            states.append(h)
        return states

    exact = torch.autograd.functional.jacobian(lambda h: run(h)[-1], h_t)[0, :, 0, :]
    jacobians = [torch.diag(1 - h[0] ** 2) @ W_hh for h in run(h_t)]
    latest_first = jacobians[2] @ jacobians[1] @ jacobians[0]
    assert torch.allclose(exact, latest_first, atol=1e-12)
    assert not torch.allclose(exact, jacobians[0] @ jacobians[1] @ jacobians[2], atol=1e-3)


def test_training_is_truncated_bptt_from_a_zero_state(page, glued):
    _, text = page
    assert re.search(r"truncated\s+backpropagation\s+through\s+time", text)
    assert glued["ch05_block"] == 64 and glued["ch05_steps_back"] == 63
    model = RNNLanguageModel(10, embedding_dim=4, hidden_dim=5)
    idx = torch.randint(0, 10, (2, 7), generator=torch.Generator().manual_seed(0))
    assert torch.equal(model(idx)[0], model(idx, h0=torch.zeros(2, 5))[0])  # h0 = 0 by default


def test_memory_fades_and_gradients_vanish_or_explode_as_the_prose_says(page, glued):
    _, text = page
    k1 = number(r"change at k = 1: ([\d.e+-]+)", text)
    k10 = number(r"k = 10: ([\d.e+-]+)", text)
    k40 = number(r"k = 40: ([\d.e+-]+)", text)
    assert k1 > 10 * k10 > 100 * k40 > 0
    k80 = number(r"k = 80: ([\d.e+-]+)", text)
    # "k = 1 is the last one read, whose successor is predicted": the page edits the k-th
    # input from the end and compares the predictions made after the last input
    assert "edited[:, -k] = " in text and "model(edited)[0][:, -1]" in text
    assert "model(windows)[0][:, -1]" in text
    assert 1e-8 < k40 < 1e-6 and 1e-8 < k80 < 1e-6  # "the rounding noise ... around 1e-7"
    k40_64, k80_64 = map(
        float, re.search(r"in float64: k = 40: ([\d.e+-]+); k = 80: ([\d.e+-]+)", text).groups()
    )
    assert (glued["ch05_memory_40_f64"], glued["ch05_memory_80_f64"]) == (
        f"{k40_64:.1e}",
        f"{k80_64:.1e}",
    )
    # "that this floor is rounding shows in float64, where the change goes on falling"
    assert k40_64 < k40 / 10 and k80_64 < k40_64 / 1000
    assert 1e-17 < k80_64 < 1e-14  # "where it meets float64's own rounding floor"
    ratios = re.search(
        r"relative to the last step:\s+ρ = 0\.5: ([\d.e+-]+), "
        r"ρ = 1: ([\d.e+-]+), ρ = 2: ([\d.e+-]+), ρ = 4: ([\d.e+-]+), "
        r"trained: ([\d.e+-]+)",
        text,
    )
    assert ratios, "the gradient ratios are not on the page"
    radii = re.search(r"measured spectral radius of W_hh: ([\d., ]+)\n", text)
    assert radii, "the measured radii are not on the page"
    # divided by the measured radius: each matrix has exactly the rho it is labelled with
    assert [float(r) for r in radii.group(1).split(", ")] == [0.5, 1.0, 2.0, 4.0]
    printed = ratios.groups()
    half, one, two, four, trained = map(float, printed)
    keys = ("half", "one", "two", "four", "trained")
    assert tuple(glued[f"ch05_ratio_{key}"] for key in keys) == printed
    assert half < 1e-10 and four > 1e10  # astronomically small and large, as the text says
    assert one < 1 < two  # "at rho = 1 it still shrinks"; "for rho >= 2 it explodes"
    assert half < one < two < four
    assert trained < 1e-3  # the trained model's gradient vanishes too


CLOSE = 0.2  # the page's threshold, in nats, for "about the same" final loss
SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def readable(x: float) -> str:
    """How the page writes a number in its prose: 26, 0.014, 1.9 × 10⁷, 3.8 × 10⁻¹⁰."""
    if 1e-3 <= x < 1e3:
        return f"{x:.2g}"
    mantissa, exponent = f"{x:.1e}".split("e")
    return f"{mantissa} × 10{str(int(exponent)).translate(SUPERSCRIPT)}"


def span(values: list[float]) -> str:
    low, high = f"{min(values):.2f}", f"{max(values):.2f}"
    return low if low == high else f"{low} to {high}"


def clipping_runs(raw: str) -> dict[tuple[str, str], dict[str, list[float]]]:
    """The clipping table: per (start, clipping), the radius, first and final loss and largest
    norm of each seed."""
    runs = {}
    for start, clipping, *cells in table(raw, "start"):
        radius, first, last, largest = ([float(v) for v in cell.split(", ")] for cell in cells)
        assert len(radius) == len(first) == len(last) == len(largest) == 3  # three seeds
        runs[start, clipping] = {"radius": radius, "first": first, "last": last, "largest": largest}
    return runs


def test_clipping_runs_have_the_stated_radii_and_the_prose_states_what_they_show(page, glued):
    """Recompute each verdict of the clipping paragraphs from the table, as the page does."""
    raw, text = page
    runs = clipping_runs(raw)
    starts = sorted({start for start, _ in runs})
    assert starts == ["default start", "ρ = 2", "ρ = 4"]
    mid, high = glued["ch05_clip_rho_mid"], glued["ch05_clip_rho_high"]
    assert (mid, high) == ("2", "4")  # the caption of Fig. 5.5 names rho = 2
    plain, clipped = "no clipping", f"clipped at {glued['ch05_clip_max_norm']}"
    assert {clipping for _, clipping in runs} == {plain, clipped}
    # the radii are what the prose says: measured, exactly rho, and small for the default
    for start, value in (("ρ = 2", mid), ("ρ = 4", high)):
        for clipping in (plain, clipped):
            assert runs[start, clipping]["radius"] == [float(value)] * 3
    for start in starts:  # "the two runs of a seed start from the same weights and batches"
        assert runs[start, plain]["first"] == runs[start, clipped]["first"]
    default = runs["default start", plain]
    assert max(default["radius"]) < 1
    assert glued["ch05_default_radius"] == span(default["radius"])

    # the default start: no large gradient, and clipping changes little
    assert max(default["largest"]) < 10
    assert glued["ch05_default_largest"] == readable(max(default["largest"]))
    change = max(
        abs(round(a - b, 2))
        for a, b in zip(default["last"], runs["default start", clipped]["last"], strict=True)
    )
    assert glued["ch05_default_change"] == f"{change:.2f}" and change <= CLOSE

    # rho = 2: the verdict on the unclipped runs, worded as the page words it
    p, c = runs["ρ = 2", plain]["last"], runs["ρ = 2", clipped]["last"]
    spikes = runs["ρ = 2", plain]["largest"]
    assert max(spikes) > 100  # "the gradient norm spikes"
    assert glued["ch05_mid_spikes"] == f"{readable(min(spikes))} to {readable(max(spikes))}"
    # "the run with the largest spike ends ... behind its clipped twin; the other two end
    # within CLOSE nats of theirs" (the page asserts it; here it is recomputed from the table)
    worst = spikes.index(max(spikes))
    assert round(p[worst] - c[worst], 2) > CLOSE
    assert all(abs(round(p[i] - c[i], 2)) <= CLOSE for i in range(3) if i != worst)
    assert glued["ch05_mid_worst_plain"] == f"{p[worst]:.2f}"
    assert glued["ch05_mid_worst_clipped"] == f"{c[worst]:.2f}"
    assert glued["ch05_mid_worst_gap"] == f"{round(p[worst] - c[worst], 2):.2f}"
    assert glued["ch05_close"] == f"{CLOSE:g}"
    assert glued["ch05_mid_clipped_span"] == span(c)
    above = max(round(a - b, 2) for a, b in zip(c, default["last"], strict=True))
    assert glued["ch05_mid_above_default"] == f"{above:.2f}" and above <= CLOSE
    assert 0 < glued["ch05_mid_spike_step"] <= int(glued["ch05_clip_steps"].replace(",", ""))

    # rho = 4: clipping does not rescue it, and the clipped runs learn far less
    p4, c4 = runs["ρ = 4", plain]["last"], runs["ρ = 4", clipped]["last"]
    # "clipping does not help; it makes things worse": every clipped run ends clearly behind
    assert all(round(b - a, 2) > CLOSE for a, b in zip(p4, c4, strict=True))
    assert glued["ch05_high_plain_span"] == span(p4)
    assert glued["ch05_high_clipped_span"] == span(c4)
    assert glued["ch05_default_span"] == span(default["last"])
    assert min(c4) > max(default["last"]) + CLOSE  # "learn far less than ... the default start"
    first4 = runs["ρ = 4", clipped]["first"]
    assert glued["ch05_high_clipped_first"] == span(first4)
    # "none of them ends below where it began, and all end above the uniform guess"
    assert all(c >= f for f, c in zip(first4, c4, strict=True))
    vocab_size = CharTokenizer.from_text(load_text("shakespeare")).vocab_size
    assert min(c4) > round(np.log(vocab_size), 2)
    assert glued["ch05_V"] == vocab_size and glued["ch05_log_v"] == f"{np.log(vocab_size):.2f}"
    flat = " ".join(text.split())
    assert "clipping does not help; it makes things worse" in flat
    assert "none of them ends below where it began, and all end above the uniform guess" in flat

    # why: the output layer's share of the first gradient
    shares = {
        start: [float(v) for v in values.split(", ")]
        for start, values in re.findall(
            r"^\s+(default start|ρ = 2|ρ = 4)\s+([\d.e+-]+(?:, [\d.e+-]+){2})$",
            text,
            re.MULTILINE,
        )
    }
    assert set(shares) == set(starts)
    assert glued["ch05_share_default"] == span(shares["default start"])
    assert min(shares["default start"]) > 0.5
    assert max(shares["ρ = 4"]) < 1e-6  # "a vanishing share of the whole"
    assert glued["ch05_share_high"] == readable(max(shares["ρ = 4"]))


def test_clipping_equals_pytorch(page):
    _, text = page
    # "clips every step by default, so the character RNN above was trained with clipping"
    assert TrainConfig().grad_clip == 1.0
    training_cell = re.search(r"config = TrainConfig\((.*?)\)\n", text, flags=re.DOTALL)
    assert training_cell and "grad_clip" not in training_cell.group(1)
    assert (
        f"training loop clips every step by default (grad_clip={TrainConfig().grad_clip} in "
        "TrainConfig, so the character RNN above was trained with clipping)"
    ) in " ".join(text.split())
    ours, theirs = re.search(r"clip_grad_norm_: norm ([\d.]+) vs ([\d.]+)", text).groups()
    assert ours == theirs
    assert (
        number(r"clip_grad_norm_: norm [\d.]+ vs [\d.]+,\s+largest difference ([\d.e+-]+)", text)
        < 1e-6
    )


def test_page_has_its_figures_and_math(page):
    """Goals, summary, exercise link and non-empty figures are checked for every chapter in
    test_book.py; here, that this chapter's own figures and equations are there."""
    names = ("unrolled", "training", "memory", "unit", "gradients", "clipping")
    check_figures(page[0], *(f"fig-ch05-{name}" for name in names), at_least=5, math=8)


UNIT_FEATURES = (
    "the character is a letter",
    "position in the line",
    "the next character is a newline",
)


def test_one_hidden_unit_tracks_letters_and_none_tracks_the_line(page, glued):
    """The unit is chosen on one stretch of validation text and measured on another; the prose
    says what the table shows there: one unit follows "the character is a letter" far more
    closely than the median unit, and no unit follows the position in the line or its end."""
    raw, text = page
    # the choice is made on the first stretch only; the fresh one is the other end of the text
    assert 'units[feature] = int(np.argmax(np.abs(r[feature, "choice"])))' in text
    assert "choice_ids, fresh_ids = val_ids[:STRETCH], val_ids[-STRETCH:]" in text
    stretch = int(glued["ch05_unit_stretch"].replace(",", ""))
    ids = load_text("shakespeare")
    assert 2 * stretch < len(ids) - int(0.9 * len(ids))  # the two stretches do not overlap
    rows = {row[0]: row[1:] for row in table(raw, "feature")}
    assert tuple(rows) == UNIT_FEATURES
    unit, choice, fresh, median = rows["the character is a letter"]
    choice, fresh, median = abs(float(choice)), abs(float(fresh)), float(median)
    assert glued["ch05_unit_letter"] == int(unit)
    assert glued["ch05_unit_letter_choice"] == f"{choice:.2f}"
    assert glued["ch05_unit_letter_fresh"] == f"{fresh:.2f}"
    assert glued["ch05_unit_letter_median"] == f"{median:.2f}"
    assert fresh > 0.7 and fresh > 2.5 * median  # "tracks the first feature"
    assert float(glued["ch05_unit_letter_ratio"]) == pytest.approx(fresh / median, abs=0.15)
    # "one sign inside words, the other between them"
    assert float(glued["ch05_unit_on_letters"]) * float(glued["ch05_unit_between"]) < 0
    # "the other two features find no such unit": the chosen units stay below the ceiling
    ceiling = float(glued["ch05_unit_ceiling"])
    assert ceiling <= 0.5
    for feature in UNIT_FEATURES[1:]:
        assert all(abs(float(value)) < ceiling for value in rows[feature][1:3])
    position_unit, _, position_fresh, _ = rows["position in the line"]
    assert glued["ch05_unit_position"] == int(position_unit)
    assert glued["ch05_unit_position_fresh"] == f"{abs(float(position_fresh)):.2f}"
    newline_fresh = rows["the next character is a newline"][2]
    assert glued["ch05_unit_newline_fresh"] == f"{abs(float(newline_fresh)):.2f}"
    flat = " ".join(text.split())
    assert f"Unit {glued['ch05_unit_letter']} tracks the first feature" in flat
    assert "The other two features find no such unit." in flat

"""Chapter 6's rendered page: the cells equal PyTorch's, the parameter counts follow the gate
counts, and the memory experiment shows what the prose says about it."""

from __future__ import annotations

import re

import pytest
from _book_helpers import html_tables, read_page


@pytest.fixture(scope="module")
def page(built_book):
    return read_page(built_book, "ch06_lstm")


def table(raw: str, first_column: str) -> dict[str, list[str]]:
    for rows in html_tables(raw):
        if rows and rows[0][0] == first_column:
            return {row[0]: row[1:] for row in rows[1:]}
    raise AssertionError(f"no table with first column {first_column!r}")


def percent(cell: str) -> float:
    return float(cell.rstrip("%")) / 100


def test_hand_written_cells_equal_pytorch(page):
    _, text = page
    for name in ("torch.nn.LSTMCell", "torch.nn.LSTM", "torch.nn.GRUCell"):
        value = re.search(rf"largest difference from {re.escape(name)}:\s+([\d.e+-]+)", text)
        assert value and float(value.group(1)) < 1e-12, name


def test_parameter_counts_follow_the_number_of_gate_blocks(page):
    raw, _ = page
    counts = {name: int(row[0].replace(",", "")) for name, row in table(raw, "cell").items()}
    D, H = 16, 64
    rnn = H * D + H * H + 2 * H  # W_ih, W_hh and the two bias vectors
    assert counts == {"RNN": rnn, "LSTM": 4 * rnn, "GRU": 3 * rnn}


def test_gated_networks_remember_where_the_plain_rnn_cannot(page):
    raw, text = page
    accuracy = table(raw, "network")
    assert all(percent(accuracy[name][0]) > 0.95 for name in ("RNN", "LSTM", "GRU"))
    assert percent(accuracy["RNN"][1]) < 0.4  # "stays at chance"
    assert percent(accuracy["LSTM"][1]) > 0.95 and percent(accuracy["GRU"][1]) > 0.95
    assert percent(accuracy["LSTM, forget bias not raised"][1]) < 0.4
    assert "7 networks trained in" in text and "chance is 25%" in text


def test_gradient_reach_is_far_stronger_through_gates(page):
    _, text = page
    reach = {label.strip(): (float(a), float(b)) for label, a, b in re.findall(
        r"\n\s*([A-Z][^\n]*?)\s+([\d.]+e[+-]\d+) -> ([\d.]+e[+-]\d+)", text)}
    assert set(reach) == {"RNN", "LSTM", "GRU", "LSTM, forget bias not raised"}
    for gated in ("LSTM", "GRU"):
        assert reach[gated][0] > 1e3 * reach["RNN"][0]  # untrained
        assert reach[gated][1] > 1e3 * reach["RNN"][1]  # trained
    assert reach["LSTM"][0] > 1e3 * reach["LSTM, forget bias not raised"][0]


def test_page_has_its_figures_and_math(page):
    """Goals, summary, exercise link and non-empty figures are checked for every chapter in
    test_book.py; here, that this chapter's own figures and equations are there."""
    raw, _ = page
    assert len(re.findall(r'<img[^>]+src="[^"]+\.png"', raw)) >= 2, "training curves and gradient reach figures expected"
    assert raw.count('class="math') >= 6

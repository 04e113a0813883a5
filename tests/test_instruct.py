"""Chapter 14's instruction data: prompt → response pairs from the plays, a loss on the
responses only, fine-tuning that lowers it, and an exact-match score that is greedy decoding's."""

import json
from pathlib import Path

import pytest
import torch

from mini_llm import instruct
from mini_llm.gpt import GPT, GPTConfig
from mini_llm.tokenizer import CharTokenizer

PLAY = """The Tragedy of Nobody

ACT I

Enter HAMLET and OPHELIA

HAMLET:
To be, or not to be.
My lord?

OPHELIA:
Good my lord,
How does your honour?

FIRST PLAYER:
'Tis well spoken.

HAMLET:
Words, words, words.
"""
TOKENIZER = CharTokenizer.from_text(PLAY + "".join(instruct.TEMPLATES.values()) + "ABCDEFGH")


def tiny_gpt(seed=0):
    torch.manual_seed(seed)
    return GPT(GPTConfig(vocab_size=TOKENIZER.vocab_size, block_size=48, n_layer=1, n_head=2,
                         n_embd=32))  # fmt: skip


def examples():
    return [e for s, lines in instruct.speeches(PLAY) for e in instruct.speech_examples(s, lines)]


def test_speeches_are_the_blocks_that_open_with_a_speaker():
    found = instruct.speeches(PLAY)
    assert [speaker for speaker, _ in found] == ["HAMLET", "OPHELIA", "FIRST PLAYER", "HAMLET"]
    assert found[0][1] == ["To be, or not to be.", "My lord?"]  # not the stage direction


def test_each_line_makes_one_example_per_task():
    made = instruct.speech_examples("HAMLET", ["To be, or not to be.", "--"])
    assert [(e.task, e.prompt, e.response) for e in made] == [
        ("speaker", "Who speaks: To be, or not to be.\n", "HAMLET\n"),
        ("first", "First word: To be, or not to be.\n", "To\n"),
        ("last", "Last word: To be, or not to be.\n", "be\n"),
        ("speaker", "Who speaks: --\n", "HAMLET\n"),  # a line without words has no word tasks
    ]
    made = instruct.speech_examples("X", ["Ne'er look o'er."], ("first", "last"))
    assert [e.response for e in made] == ["Ne'er\n", "o'er\n"]  # a word keeps its apostrophes


def test_the_mask_covers_exactly_the_response_tokens():
    batch = examples()[:7]
    inputs, targets, mask = instruct.encode_examples(batch, TOKENIZER)
    longest = max(len(e.text) for e in batch)
    assert inputs.shape == targets.shape == mask.shape == (7, longest - 1)
    for row, example in enumerate(batch):
        n, p = len(example.text), len(example.prompt)
        assert TOKENIZER.decode(inputs[row, : n - 1].tolist()) == example.text[:-1]
        expected = torch.zeros(longest - 1, dtype=torch.bool)
        expected[p - 1 : n - 1] = True  # the positions that predict the response
        assert torch.equal(mask[row], expected)
        assert TOKENIZER.decode(targets[row][mask[row]].tolist()) == example.response
        assert (targets[row][~mask[row]] == instruct.IGNORE).all()


def test_an_example_longer_than_the_context_is_refused():
    with pytest.raises(ValueError, match="context of 8"):
        instruct.encode_examples(examples()[:1], TOKENIZER, block_size=8)


def test_the_masked_loss_ignores_the_prompt():
    inputs, targets, mask = instruct.encode_examples(examples()[:4], TOKENIZER)
    logits = torch.randn(*inputs.shape, TOKENIZER.vocab_size)
    loss = instruct.masked_loss(logits, targets)
    changed = logits.clone()
    changed[~mask] = torch.randn(int((~mask).sum()), TOKENIZER.vocab_size)
    assert torch.equal(instruct.masked_loss(changed, targets), loss)
    expected = torch.nn.functional.cross_entropy(logits[mask], targets[mask])
    assert torch.allclose(loss, expected)


def test_the_split_holds_out_whole_lines_and_is_fixed():
    many = "".join(f"\n\nLORD {a}:\nSpeech {a}, first.\nSpeech {a}, last." for a in "ABCDEFGH")
    text = PLAY + PLAY + many  # every line of PLAY twice: one copy may be trained on
    train, held_out = instruct.instruction_split(text, held_out_fraction=0.5)
    assert train and held_out
    seen = {line for e in train for line in e.lines}
    assert not seen & {line for e in held_out for line in e.lines}
    assert instruct.instruction_split(text, held_out_fraction=0.5) == (train, held_out)
    assert instruct.instruction_split(text, held_out_fraction=0.5, seed=1) != (train, held_out)
    everything = instruct.instruction_split(PLAY * 3, held_out_fraction=0.5)
    assert everything[1] == []  # each held-out line was also in a training speech: dropped


@pytest.fixture(scope="module")
def shakespeare_split():
    return instruct.instruction_split()


def test_the_shakespeare_split_is_disjoint_by_line_and_fits_the_context(shakespeare_split):
    train, held_out = shakespeare_split
    assert len(held_out) > 10_000 and len(train) > 8 * len(held_out)
    train_lines = {line for e in train for line in e.lines}
    assert not any(line in train_lines for e in held_out for line in e.lines)
    assert max(len(e.text) for e in train + held_out) <= 65  # a context of 64 reads 65
    assert {e.task for e in held_out} == set(instruct.TEMPLATES)


def test_the_tokenizer_is_chapter_11s():
    recording = Path(__file__).parents[1] / "book" / "results" / "ch11-gpt-cpu.json"
    config = json.loads(recording.read_text())["results"]["model_config"]
    tokenizer = instruct.shakespeare_tokenizer()
    assert tokenizer.vocab_size == config["vocab_size"]
    text = "".join(template.format(line="To be.") for template in instruct.TEMPLATES.values())
    assert tokenizer.decode(tokenizer.encode(text)) == text


def test_a_few_fine_tuning_steps_lower_the_masked_loss_and_are_seeded():
    data = examples()
    model = tiny_gpt()
    before = instruct.evaluate(model, data, TOKENIZER)["response_bpc"]
    losses = instruct.finetune(model, data, TOKENIZER, steps=30, batch_size=8,
                               learning_rate=3e-3, seed=0)  # fmt: skip
    after = instruct.evaluate(model, data, TOKENIZER)["response_bpc"]
    assert len(losses) == 30 and after < 0.7 * before
    again = instruct.finetune(tiny_gpt(), data, TOKENIZER, steps=30, batch_size=8,
                              learning_rate=3e-3, seed=0)  # fmt: skip
    assert again == losses


def test_exact_match_is_what_greedy_decoding_answers():
    data = examples()
    model = tiny_gpt()
    instruct.finetune(model, data, TOKENIZER, steps=150, batch_size=16, learning_rate=3e-3)
    answers = [instruct.greedy_response(model, TOKENIZER, e.prompt) for e in data]
    right = [answer == e.response for answer, e in zip(answers, data)]
    assert 0 < sum(right)  # it learned some answers, so the test compares something
    for example, is_right in zip(data, right):
        assert instruct.evaluate(model, [example], TOKENIZER)["exact_match"] == is_right
    assert instruct.evaluate(model, data, TOKENIZER)["exact_match"] == sum(right) / len(data)

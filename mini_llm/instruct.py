"""Chapter 14 -- Adapting the GPT: instruction tuning and LoRA.

A model pre-trained on plays continues text; it does not answer. Instruction tuning shows it
prompts followed by the responses we want, in one fixed template, and trains it on the
responses only: the prompt is given, so the loss ignores it, and every gradient goes to
producing the answer. Here the examples are made by code from the Shakespeare corpus (who
speaks a line, its first word, its last word), split by speech so that
no held-out line was ever trained on, and scored by exact match of the greedy answer and by
bits per character of the answer.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import cache

import numpy as np
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from mini_llm.corpus import load_text
from mini_llm.tokenizer import CharTokenizer

TEMPLATES = {
    "speaker": "Who speaks: {line}\n",
    "first": "First word: {line}\n",
    "last": "Last word: {line}\n",
}
"""Each task's prompt; its response is one line that ends with a newline, the end of the answer."""
IGNORE = -100  # the target id that F.cross_entropy skips (ignore_index): not a response token
SPEAKER = re.compile(r"[A-Z][A-Z .,'&-]*:")  # "KING HENRY VI:" opens a speech
WORD = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)*")


@dataclass(frozen=True)
class Example:
    """One prompt → response pair; ``lines`` are the corpus lines it was made from."""

    task: str
    prompt: str
    response: str
    lines: tuple[str, ...]

    @property
    def text(self) -> str:
        return self.prompt + self.response


@cache
def shakespeare_tokenizer() -> CharTokenizer:
    """The character tokenizer of chapter 11's GPT: the sorted characters of the corpus."""
    return CharTokenizer.from_text(load_text("shakespeare"))


def speeches(text: str) -> list[tuple[str, list[str]]]:
    """``(speaker, lines)`` for each speech of the plays: a block after a blank line that opens
    with a capitalised name and a colon ("HAMLET:"), the lines spoken after it."""
    found = []
    for block in text.split("\n\n"):
        head, *lines = block.strip("\n").split("\n")
        lines = [line.strip() for line in lines if line.strip()]
        if SPEAKER.fullmatch(head) and lines:
            found.append((head[:-1], lines))
    return found


def speech_examples(speaker: str, lines: list[str], tasks=tuple(TEMPLATES)) -> list[Example]:
    """Every example of ``tasks`` that one speech makes (a line without words makes none)."""
    examples = []
    for line in lines:
        words = WORD.findall(line)
        answers = {
            "speaker": (speaker, (line,)),
            "first": (words[0], (line,)) if words else None,
            "last": (words[-1], (line,)) if words else None,
        }
        for task in tasks:
            if answers[task] is not None:
                response, used = answers[task]
                prompt = TEMPLATES[task].format(line=line)
                examples.append(Example(task, prompt, response + "\n", used))
    return examples


def instruction_split(
    text: str | None = None,
    tasks=tuple(TEMPLATES),
    max_chars: int = 65,
    held_out_fraction: float = 0.1,
    seed: int = 0,
) -> tuple[list[Example], list[Example]]:
    """``(train, held_out)`` examples of ``tasks`` from the plays (the Shakespeare corpus by
    default), each at most ``max_chars`` long (a GPT of context T reads T + 1 characters).

    Whole speeches are held out, chosen by a seeded shuffle; a held-out example that shares a
    line's text with any training speech (short lines such as "My lord?" recur) is dropped,
    so no held-out line was seen in training, as prompt or as response."""
    text = load_text("shakespeare") if text is None else text
    found = speeches(text)
    order = np.random.default_rng(seed).permutation(len(found))
    held = set(order[: round(held_out_fraction * len(found))].tolist())
    train, held_out, train_lines = [], [], set()
    for number, (speaker, lines) in enumerate(found):
        if number not in held:
            train_lines.update(lines)
    for number, (speaker, lines) in enumerate(found):
        for example in speech_examples(speaker, lines, tasks):
            if len(example.text) > max_chars:
                continue
            if number not in held:
                train.append(example)
            elif not train_lines.intersection(example.lines):
                held_out.append(example)
    return train, held_out


def encode_examples(examples, tokenizer, block_size: int | None = None):
    """A batch: ``(inputs, targets, mask)``, each (B, T) with T the longest example minus one.

    ``inputs`` are each example's ids but the last; ``targets`` the ids one further, set to
    ``IGNORE`` except where they are response tokens; ``mask`` is True exactly there. Short
    examples are padded at the end, where causal attention keeps the padding from touching
    the real tokens."""
    ids = [tokenizer.encode(example.text) for example in examples]
    T = max(len(row) for row in ids) - 1
    if block_size is not None and T > block_size:
        raise ValueError(f"an example of {T + 1} characters does not fit a context of {block_size}")
    inputs = torch.zeros(len(ids), T, dtype=torch.long)
    targets = torch.full((len(ids), T), IGNORE, dtype=torch.long)
    for row, (example, tokens) in enumerate(zip(examples, ids)):
        start = len(tokenizer.encode(example.prompt)) - 1  # predicts the first response token
        inputs[row, : len(tokens) - 1] = torch.tensor(tokens[:-1])
        targets[row, start : len(tokens) - 1] = torch.tensor(tokens[start + 1 :])
    return inputs, targets, targets != IGNORE


def masked_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over the response tokens only (targets ``IGNORE`` elsewhere)."""
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=IGNORE)


def finetune_step(model, optimizer, inputs, targets, grad_clip: float | None = 1.0) -> float:
    """One step of instruction tuning: the masked loss of a batch, its gradients, one update of
    the parameters ``optimizer`` holds. Returns the loss before the update."""
    loss = masked_loss(model(inputs)[0], targets)
    optimizer.zero_grad()
    loss.backward()
    if grad_clip is not None:  # one unlucky batch must not undo what pre-training learned
        parameters = [p for group in optimizer.param_groups for p in group["params"]]
        torch.nn.utils.clip_grad_norm_(parameters, grad_clip)
    optimizer.step()
    return loss.item()


def finetune(
    model,
    examples,
    tokenizer,
    steps: int = 100,
    batch_size: int = 16,
    learning_rate: float = 1e-3,
    seed: int = 0,
    grad_clip: float | None = 1.0,
    progress: bool = False,
) -> list[float]:
    """AdamW on :func:`masked_loss`, on the parameters that require gradients (all of them for
    full fine-tuning, only A and B after :func:`mini_llm.lora.add_lora`); the loss of every
    step. Batches are drawn by a generator seeded with ``seed``, so two runs with the same seed
    see the same examples in the same order. No weight decay: it would pull the weights
    towards zero, not towards the trained model."""
    parameters = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(parameters, lr=learning_rate, weight_decay=0.0)
    generator = torch.Generator().manual_seed(seed)
    block_size = model.config.block_size
    losses = []
    model.train()
    for _ in tqdm(range(steps), disable=not progress, desc="fine-tuning"):
        chosen = torch.randint(len(examples), (batch_size,), generator=generator).tolist()
        inputs, targets, _ = encode_examples([examples[i] for i in chosen], tokenizer, block_size)
        losses.append(finetune_step(model, optimizer, inputs, targets, grad_clip))
    model.eval()
    return losses


@torch.no_grad()
def evaluate(model, examples, tokenizer, batch_size: int = 128) -> dict[str, float]:
    """Exact match of the greedy responses and bits per character of the responses.

    Both come from one forward pass over prompt + response: greedy decoding writes the
    response exactly (newline included) when the most likely token at every response
    position, given the right tokens before it, is the right one, since then greedy decoding
    is fed exactly those tokens."""
    model.eval()
    exact, bits, characters = 0, 0.0, 0
    for start in range(0, len(examples), batch_size):
        part = examples[start : start + batch_size]
        inputs, targets, mask = encode_examples(part, tokenizer, model.config.block_size)
        logits = model(inputs)[0].float()
        right = (logits.argmax(-1) == targets) | ~mask
        exact += right.all(dim=1).sum().item()
        bits += F.cross_entropy(
            logits.flatten(0, 1), targets.flatten(), ignore_index=IGNORE, reduction="sum"
        ).item() / math.log(2)
        characters += mask.sum().item()
    return {"exact_match": exact / len(examples), "response_bpc": bits / characters}


@torch.no_grad()
def greedy_response(model, tokenizer, prompt: str, max_new_tokens: int | None = None) -> str:
    """The model's answer to ``prompt``: greedy decoding up to its first newline (kept)."""
    ids = torch.tensor([tokenizer.encode(prompt)])
    room = model.config.block_size - ids.size(1)
    new = room if max_new_tokens is None else min(max_new_tokens, room)
    text = tokenizer.decode(model.generate(ids, new, temperature=0)[0, ids.size(1) :].tolist())
    end = text.find("\n")
    return text if end < 0 else text[: end + 1]

"""Which graded answer cell replaces which part of the reference package: one table.

Each row is one part a learner writes: the assignment (``solutions/<assignment>/``), the name
the answer cell defines (its nbgrader ``grade_id`` is ``<name>_impl``), and the reference
symbol, ``module:name``, that it replaces and that ``mini-llm learner check`` compares it with.

Two optional columns name an adapter of :mod:`mini_llm.learner.adapters` where the signatures
differ:

* ``also`` -- further places, ``module:name:adapter``, where the package uses the part under
  another form: a class the GPT builds its layers from (``torch.nn.LayerNorm``, ``gpt.MLP``,
  looked up when a model is built) or a function with another signature (the training loop's
  ``learning_rate_at(step, config)``); the adapter turns the learner's function into it;
* ``stand_in`` -- while a chapter is being written its reference may not exist yet: the adapter
  computes it from what does exist, in the learner's signature.

A row whose notebook or answer cell does not exist yet is reported as missing, so rows for
chapters still being written do no harm. Adding a chapter's graded parts is adding its rows
(CONTRIBUTING.md).
"""

from __future__ import annotations

from typing import NamedTuple


class Part(NamedTuple):
    assignment: str
    name: str
    reference: str  # "module:name"
    also: tuple[str, ...] = ()  # "module:name:adapter"
    stand_in: str | None = None  # adapter that computes the reference while it is missing

    @property
    def grade_id(self) -> str:
        return f"{self.name}_impl"

    @property
    def label(self) -> str:
        return f"{self.assignment}.{self.name}"


_ROWS = """
ch01_bigrams        count_bigrams                   mini_llm.ngram
ch01_bigrams        bigram_probabilities            mini_llm.ngram
ch01_bigrams        sequence_probability            mini_llm.ngram
ch01_bigrams        sample_sequence                 mini_llm.ngram
ch01_bigrams        average_nll                     mini_llm.ngram
ch02_ngrams         ngram_counts                    mini_llm.smoothing
ch02_ngrams         add_k_probabilities             mini_llm.smoothing
ch02_ngrams         interpolate                     mini_llm.smoothing
ch02_ngrams         perplexity                      mini_llm.evaluation
tools_pytorch       one_hot                         mini_llm.neural_bigram
tools_pytorch       numerical_gradient              mini_llm.gradients
tools_pytorch       gradient_descent                mini_llm.gradients
tools_pytorch       NeuralBigram                    mini_llm.neural_bigram
tools_pytorch       bigram_training_step            mini_llm.neural_bigram
ch03_neural_lm      context_target_pairs            mini_llm.mlp_lm
ch03_neural_lm      MLPLanguageModel                mini_llm.mlp_lm
ch03_neural_lm      training_step                   mini_llm.mlp_lm
ch03_neural_lm      evaluate_perplexity             mini_llm.mlp_lm
ch04_embeddings     skipgram_pairs                  mini_llm.embeddings
ch04_embeddings     noise_distribution              mini_llm.embeddings
ch04_embeddings     negative_sampling_loss          mini_llm.embeddings
ch04_embeddings     nearest_neighbours              mini_llm.embeddings
ch04_embeddings     analogy                         mini_llm.embeddings
ch05_rnn            rnn_step                        mini_llm.rnn
ch05_rnn            rnn_forward                     mini_llm.rnn
ch05_rnn            rnn_backward                    mini_llm.rnn
ch05_rnn            clip_by_global_norm             mini_llm.rnn
ch06_lstm           lstm_step                       mini_llm.lstm
ch06_lstm           lstm_forward                    mini_llm.lstm
ch06_lstm           gru_step                        mini_llm.lstm
ch06_lstm           first_token_task                mini_llm.lstm
ch07_attention      number_to_words                 mini_llm.seq2seq
ch07_attention      masked_softmax                  mini_llm.seq2seq
ch07_attention      additive_attention              mini_llm.seq2seq
ch07_attention      exact_match                     mini_llm.seq2seq
ch08_self_attention scaled_dot_product_attention    mini_llm.self_attention
ch08_self_attention causal_mask                     mini_llm.self_attention
ch08_self_attention split_heads                     mini_llm.self_attention
ch08_self_attention sinusoidal_positional_encoding  mini_llm.self_attention
ch09_transformer    layer_norm                      mini_llm.transformer  also=torch.nn:LayerNorm:layer_norm_module
ch09_transformer    feed_forward                    mini_llm.transformer  also=mini_llm.gpt:MLP:feed_forward_module
ch09_transformer    attention_sublayer              mini_llm.transformer
ch09_transformer    EncoderLayer                    mini_llm.transformer
ch09_transformer    noam_learning_rate              mini_llm.transformer
ch09_transformer    transformer_parameter_count     mini_llm.transformer
ch10_tokenization   count_pairs                     mini_llm.bpe
ch10_tokenization   merge                           mini_llm.bpe
ch10_tokenization   train_bpe                       mini_llm.bpe
ch10_tokenization   encode                          mini_llm.bpe
ch10_tokenization   decode                          mini_llm.bpe
ch11_gpt            causal_attention_weights        mini_llm.gpt
ch11_gpt            Block                           mini_llm.gpt
ch11_gpt            GPT                             mini_llm.gpt
ch11_gpt            filter_logits                   mini_llm.generate
ch11_gpt            next_token                      mini_llm.generate
ch11_gpt            parameter_count                 mini_llm.gpt          stand_in=parameter_count_of_config
ch12_gpu_training   learning_rate_at                mini_llm.engine.schedule:warmup_cosine_learning_rate  also=mini_llm.engine.schedule:learning_rate_at:schedule_of_config  stand_in=cosine_of_config
ch12_gpu_training   flops_per_token                 mini_llm.flops
ch12_gpu_training   mfu                             mini_llm.flops
ch12_gpu_training   fit_power_law                   mini_llm.scaling
ch13_vision_transformer patchify                mini_llm.vit
ch13_vision_transformer unpatchify              mini_llm.vit
ch13_vision_transformer PatchEmbedding          mini_llm.vit
ch13_vision_transformer ClassificationHead      mini_llm.vit
ch14_adapting_gpt   encode_examples                 mini_llm.instruct
ch14_adapting_gpt   masked_loss                     mini_llm.instruct
ch14_adapting_gpt   LoRALinear                      mini_llm.lora
ch14_adapting_gpt   finetune_step                   mini_llm.instruct
"""
"""One part a line: assignment, name, reference module (``module:name`` where the reference has
another name), then ``also=`` (comma-separated) and ``stand_in=`` where needed."""


def _parse(rows: str) -> tuple[Part, ...]:
    parts = []
    for line in rows.strip().splitlines():
        assignment, name, reference, *options = line.split()
        settings = dict(option.split("=", 1) for option in options)
        parts.append(
            Part(
                assignment,
                name,
                reference if ":" in reference else f"{reference}:{name}",
                tuple(filter(None, settings.get("also", "").split(","))),
                settings.get("stand_in"),
            )
        )
    return tuple(parts)


PARTS: tuple[Part, ...] = _parse(_ROWS)
"""Every graded part, in chapter order, then in the order of the notebook."""


TEST_CELLS = ("_tests", "_input_tests")
"""The suffixes of a part's test cells: ``<name>_tests`` grades what the part computes and, where
the notebook grades them apart, ``<name>_input_tests`` its refusal of invalid input."""


def part_tested_by(grade_id: str) -> str | None:
    """The name of the part a test cell grades (``count_bigrams_input_tests``: count_bigrams)."""
    for suffix in sorted(TEST_CELLS, key=len, reverse=True):
        if grade_id.endswith(suffix):
            return grade_id.removesuffix(suffix)
    return None


def assignments() -> list[str]:
    """The assignments that have rows, in chapter order."""
    return list(dict.fromkeys(part.assignment for part in PARTS))


def parts_of(assignment: str) -> list[Part]:
    return [part for part in PARTS if part.assignment == assignment]

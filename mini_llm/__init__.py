"""mini_llm: a language model built up one concept at a time, from bigram counts to a GPT.

The package is laid out by role. Each chapter's concept modules sit at the top level, each
opening with its chapter, and read top to bottom; the training engine that trains, measures and
saves their models is :mod:`mini_llm.engine` (it also makes them fast on a CPU, from outside
the model code); :mod:`mini_llm.grading` autogrades submissions, :mod:`mini_llm.learner` turns
solved exercises into a package of the learner's own, :mod:`mini_llm.experiments` are the
runs too long to train on a page (``mini-llm record``), :mod:`mini_llm.cli` is the ``mini-llm``
command, :mod:`mini_llm.corpus` loads the corpora, :mod:`mini_llm.checks` holds the
assertions of the exercises' test cells and :mod:`mini_llm.differential` the hidden tests'
comparisons of an answer with the reference on generated inputs.

Chapter by chapter, the modules of book/chapters.yml and the names to read first
(tests/test_layout.py checks this index against the manifest and the modules):

  1  Bigram language models by counting
       ngram: count_bigrams, bigram_probabilities, sequence_probability, sample_sequence
       vocab: Vocabulary
  2  N-grams, smoothing and perplexity
       smoothing: ngram_counts, add_k_probabilities, interpolate, NGramModel
       evaluation: split_documents, perplexity
  Tools  Tensors, gradients and a training loop
       gradients: numerical_gradient, gradient_descent
       neural_bigram: one_hot, NeuralBigram, bigram_training_step, train_neural_bigram
  3  A neural language model
       mlp_lm: context_target_pairs, MLPLanguageModel, training_step, evaluate_perplexity
       engine.train: TrainConfig, train
  4  Word embeddings
       embeddings: skipgram_pairs, negative_sampling_loss, SkipGram, nearest_neighbours, analogy
  5  Recurrent networks
       rnn: rnn_step, rnn_forward, rnn_backward, clip_by_global_norm, RNNLanguageModel
       tokenizer: Tokenizer, CharTokenizer
       engine.data: prepare, RandomBatches
  6  LSTM and GRU
       lstm: lstm_step, lstm_forward, gru_step, first_token_task
  7  Attention for sequence-to-sequence
       seq2seq: masked_softmax, additive_attention, Seq2Seq
  8  Self-attention
       self_attention: scaled_dot_product_attention, causal_mask, split_heads,
         MultiHeadAttention, sinusoidal_positional_encoding
  9  The Transformer
       transformer: layer_norm, feed_forward, EncoderLayer, DecoderLayer, Transformer,
         noam_learning_rate
 10  Tokenization
       bpe: count_pairs, merge, train_bpe, encode, decode
       bpe_fast: train_bpe_fast, BPETokenizer
       tokenizer: Tokenizer
 11  GPT
       gpt: GPTConfig, CausalSelfAttention, MLP, Block, GPT
       generate: filter_logits, next_token, generate, KVCache
       inspect_model: head_entropy, ablate_heads
       engine.configs: resolve
       hf_gpt2: from_hf_gpt2
 12  Training on a GPU
       flops: flops_per_token, mfu
       scaling: fit_power_law
       engine.train: train
       engine.schedule: learning_rate_at
       engine.checkpoint: save_checkpoint, load_checkpoint
       engine.bench: train_step_times
       engine.cpu_linear: accelerate
       engine.cpu_parallel: CoreWorkers
       engine.results: read_gpu_results
 13  A Vision Transformer
       vit: patchify, unpatchify, PatchEmbedding, ClassificationHead, VisionTransformer, matched_mlp
 14  Adapting the GPT: instruction tuning and LoRA
       instruct: instruction_split, encode_examples, masked_loss, finetune, evaluate
       lora: LoRALinear, add_lora, merge_lora, trainable_parameters, lora_parameter_count
"""

__version__ = "0.1.0"

from mini_llm import _old_names

_old_names.install()

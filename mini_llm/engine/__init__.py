"""The training engine: what trains, measures and saves the chapters' models, and no model.

* :mod:`.train` -- the one training loop (chapters 3 to 12), with :mod:`.schedule` (its
  learning rates), :mod:`.resume` (checkpoints of a run, and what a resumed run may change)
  and :mod:`.distributed` (one process of several, with ``torchrun``);
* :mod:`.data` -- token files prepared once, and random batches drawn from them;
* :mod:`.checkpoint` -- checkpoints written atomically, read back with clear errors;
* :mod:`.device` -- ``"auto"``: CUDA, then MPS, then the CPU;
* :mod:`.configs` -- the named run configurations of ``mini-llm train``;
* :mod:`.cpu_linear`, :mod:`.cpu_parallel` -- CPU speed, applied to a model from outside it:
  oneDNN products for its linear layers, a batch's rows split across the cores;
* :mod:`.bench` -- timing helpers for ``mini-llm bench`` and ``benchmarks/``;
* :mod:`.results` -- the results file of the recorded GPU run, read back with checks;
* :mod:`.recorded` -- recorded runs (``mini-llm record NAME``, the experiments of
  :mod:`mini_llm.experiments`): results files and float16 checkpoints that pages render.
"""

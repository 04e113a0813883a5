"""The learner's own mini_llm: solved exercises become a package that the reference runs with.

* :func:`.workspace.start` (``mini-llm learner start``) copies the released notebooks into
  the learner's own folder, ``my_exercises/``, never replacing a file already there;
* :func:`export` (``mini-llm learner export``) collects the answer cells of the exercise
  notebooks into one module per chapter, without running them;
* :func:`use` / :func:`using` (``--learner DIR``, ``$MINI_LLM_LEARNER``) swap the learner's
  parts into the package in this process, so that the GPT trains and samples with them;
* :mod:`.probe` (``mini-llm learner check``) runs each part on its visible tests' inputs next to
  the reference, in a child process under the grader's limits (``--sandbox``: in its sandbox).

Which answer cell replaces which function is one table, :mod:`.registry`.
"""

from mini_llm.learner.export import LearnerError, export
from mini_llm.learner.swap import use, using

__all__ = ["LearnerError", "export", "use", "using"]

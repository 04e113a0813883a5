"""Autograding that a submission cannot talk its way out of.

nbgrader does the bookkeeping (gradebook, autograde, feedback, export); this package adds what
it lacks for untrusted code at course scale:

* :mod:`.jail` -- every process that runs student code is in an OS sandbox (bubblewrap): its
  own user, PID and network namespaces, no view of the course or the grader;
* :mod:`.limits` -- time, memory and file limits on those processes;
* :mod:`.notebook` -- the assignment as the instructor wrote it; the answers of a submission;
* :mod:`.sandbox` / :mod:`.verify` -- the trusted score: tests run in the grader, the learner's
  functions in the sandbox, plain data between them (:mod:`.wire`);
* :mod:`.feedback` -- feedback that names the failed checks without revealing hidden tests;
* :mod:`.nbglue` -- the calls into nbgrader; :mod:`.runner` and :mod:`.cli` -- the command.
"""

import sys

# jsonschema (imported by nbformat) loads rfc3987_syntax where it is installed, which builds a
# parser at import: 1.5-7 s in every grader and nbgrader process on the course machine. Only
# jsonschema's "iri" format check uses it, and nbformat validates notebooks without format
# checks, so the grader and the nbgrader runs it starts go without it.
sys.modules.setdefault("rfc3987_syntax", None)

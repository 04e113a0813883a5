"""``python -m mini_llm.grading ASSIGNMENT``: the same as ``mini-llm grade ASSIGNMENT``."""

import sys

from mini_llm.grading.cli import main

sys.exit(main())

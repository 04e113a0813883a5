"""mini_llm: a language model built up one concept at a time, from bigram counts to a GPT.

Each module holds one idea of the course; the book's chapters call them and the exercise
notebooks rebuild them under the same names.
"""

__version__ = "0.1.0"

from mini_llm import _old_names

_old_names.install()

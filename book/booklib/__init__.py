"""Code that only the book's pages use: tables and the recorded GPU run's figures and text.

The pages import it as ``booklib`` (they execute in ``book/``); it is kept out of ``mini_llm``
because no learner, command or model needs it. Editing it re-executes the pages that use it,
as editing a ``mini_llm`` module does (``_ext/chapter_dependencies.py``).
"""

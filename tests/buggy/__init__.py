"""Known-buggy answers to the exercises, one module per assignment: ``tests/buggy/<assignment>.py``.

A package so that a bug file can be imported as ``buggy.<assignment>`` both by the tests (``tests/``
is on ``sys.path``) and by a notebook handed in to nbgrader with a copy of this folder beside it.
"""

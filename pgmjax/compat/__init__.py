"""Doors for code written against other libraries' interfaces, backed by pgmjax's engine.

* :mod:`pgmjax.compat.mbi`: the part of the ``mbi`` (Private-PGM) interface that smartnoise-synth's MST and AIM and
  OpenDP's contingency tables call, so that they estimate with pgmjax without a change to their code.
"""

__all__: list[str] = []

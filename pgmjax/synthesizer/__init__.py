"""A synthesizer in one line: a DataFrame of raw values in, a private synthetic DataFrame out, and a release that grows.

* :mod:`~pgmjax.synthesizer.synthesizer`: :class:`Synthesizer`, the settings of a release and :meth:`~Synthesizer.fit`,
  which makes one (the command line's ``pgmjax run`` on raw data, in Python), and :meth:`~Synthesizer.load`.
* :mod:`~pgmjax.synthesizer.release`: :class:`Release`, the fitted model with its schema, measurements and ledger:
  records on the raw scale, conditional records, a report, and :meth:`~Release.extend`.
* :mod:`~pgmjax.synthesizer.release_files`: a release's folder (the model, the measurements, the ledger).
* :mod:`~pgmjax.synthesizer.tables`: a table as a pandas DataFrame, a configuration file as a mapping.
"""

from .release import Release, Stage
from .synthesizer import Synthesizer
from .tables import read_config

__all__ = ["Synthesizer", "Release", "Stage", "read_config"]

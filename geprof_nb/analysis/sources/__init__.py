"""Where a Profile's tables come from: one :class:`~.source.Source` per kind of run.

* :mod:`.source`: the ``Source`` base (tables a source cannot give come back empty with their
  columns) and ``RunDirSource``, which builds them from a geprof run directory's raw records with the
  builders of :mod:`..tables`;
* :mod:`.msprof`, :mod:`.ascend_pt` (with :mod:`.trace_view`): real msprof and torch_npu output;
  :mod:`.csvfiles` (typed CSV and JSON reading) and :mod:`.filesource` (the exact ns the files printed)
  are what they share;
* :mod:`.parquet`: ``ParquetSource``, a geprof Parquet export read back.

Which Source opens a path is decided in one place, :mod:`..registry`.
"""

"""Readers for profiling output that geprof did not write itself: real msprof output (:mod:`.msprof`),
torch_npu run directories (:mod:`.ascend_pt`, :mod:`.trace_view`), and the CSV and exact-ns machinery
they share (:mod:`.csvfiles`, :mod:`.filesource`).  Which of them opens a path is
:mod:`..registry`'s decision.
"""

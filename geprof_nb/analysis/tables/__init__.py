"""The table builders: raw records (a :class:`~..rundir.RunDir`) and op rows -> msprof's and torch_npu's
tables, and the column names, text columns and interval arithmetic they share.

* :mod:`.summary`: op_summary, op_statistic, step_trace, task_time and the step bounds;
  :mod:`.columns` (msprof's exact column names) and :mod:`.pmu` (the AI Core PMU columns);
* :mod:`.api`, :mod:`.host`, :mod:`.tx`, :mod:`.aicpu`, :mod:`.memory`, :mod:`.communication`:
  one layer's tables each;
* :mod:`.breakdown` (step_breakdown) and :mod:`.step_split` (the step figure every summary leads with);
* helpers: :mod:`.text_columns` (text per distinct value), :mod:`.indexing` (joins by connection id).

They read the run directory reader and ``geprof_nb.prof``'s record layouts only, never a Source or a
Profile: the Sources call them.
"""

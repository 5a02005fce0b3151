"""A distributed run: its ranks, one Profile each, and the tables that compare them.

* :mod:`.profile`: ``ClusterProfile`` (the ranks, the cross-rank tables per engine, advise, export);
* :mod:`.cross_rank`: the cross-rank tables (which card is slow, which link, how long ranks wait),
  one implementation for both engines;
* :mod:`.dask_engine`: the Dask engine, which reads every rank's tables from Parquet lazily.

A cluster's findings are :mod:`..findings.cluster_advisor`'s, its exports :mod:`..export.cluster`'s.
"""

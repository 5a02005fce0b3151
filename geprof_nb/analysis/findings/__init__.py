"""What the tables say: findings ranked High / Medium / Low, each with evidence and a suggestion.

* :mod:`.advisor`: one run's rules (``Profile.advise()``) and the findings table both advisors return;
* :mod:`.cluster_advisor`: a cluster's rules (``ClusterProfile.advise()``), on its cross-rank tables.

The rules read a Profile's (or a cluster's) tables only, so they work on imported runs as on
simulated ones.
"""

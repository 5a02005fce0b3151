"""Sends meeting receives across the ranks of a cluster what-if (issue 29).

Each rank's steps are re-timed on their own graph, but a point-to-point transfer (``HcomSend`` and the
``HcomReceive`` it feeds, on two ranks) ends when both ends have started plus the transfer: in the run the two
end at the same time, the later start then the transfer.  So a change that moves one end moves the other: a
pipeline stage waits longer for a slower stage before it.  :func:`couple` re-times the ranks in turn, each with
its partners' latest predicted starts, until no start moves (Gauss-Seidel over the ranks).  Collectives keep the
wait for their peers each rank recorded (their ranks are alike in a data- or tensor-parallel group).

The pairing is read from the run: the peer of each send or receive from its HCCL sub-tasks (``Src Rank`` /
``Dst Rank``), the n-th send from rank a to rank b in a step with the n-th receive on b from a.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

#: HCCL ``OP Type`` of the point-to-point ops, and whether each sends.
P2P_OP_TYPES = {"hcom_send_": True, "hcom_receive_": False}
#: Rounds of re-timing before the coupling gives up on settling (each round moves a chain of transfers one hop).
MAX_ROUNDS = 64

#: A transfer end: (rank, iteration, step task index).
End = tuple[int, int, int]


def peers(rank: int, hccl_tasks: pd.DataFrame) -> dict[str, tuple[bool, int]]:
    """Per point-to-point node of ``rank``: (sends, the peer rank), from its HCCL sub-tasks."""
    if not len(hccl_tasks) or "Node" not in hccl_tasks:
        return {}
    p2p = hccl_tasks[hccl_tasks["OP Type"].astype(str).isin(list(P2P_OP_TYPES))]
    out = {}
    for (node, op_type), rows in p2p.groupby(["Node", "OP Type"], observed=True):
        ends = set(pd.concat([rows["Src Rank"], rows["Dst Rank"]]).astype(int)) - {rank}
        if len(ends) == 1:
            out[str(node)] = (P2P_OP_TYPES[str(op_type)], ends.pop())
    return out


def pairs(per_rank: Mapping[int, Any], hccl: Mapping[int, pd.DataFrame]) -> list[tuple[End, End, float]]:
    """Every send and its receive in the ranks' what-ifs (``per_rank``: rank -> WhatIf): (send end, receive end,
    the new transfer time over the recorded one)."""
    sends: dict[tuple, End] = {}
    receives: dict[tuple, End] = {}
    scale: dict[End, float] = {}
    for rank, w in per_rank.items():
        mine = peers(rank, hccl[rank])
        if not mine:
            continue
        for g in w.graphs:
            seen: dict[tuple, int] = {}
            names = w.tasks.name[g.index]
            for i in np.flatnonzero(np.isin(names, list(mine))):
                sends_it, peer = mine[str(names[i])]
                key = (g.iteration, rank, peer) if sends_it else (g.iteration, peer, rank)
                n = seen[key] = seen.get(key, -1) + 1
                (sends if sends_it else receives)[key + (n,)] = (rank, g.iteration, int(i))
                old = int(g.finish[i] - g.start[i])
                scale[(rank, g.iteration, int(i))] = w.duration[g.index[i]] / old if old else 1.0
    return [(s, receives[k], scale[s]) for k, s in sends.items() if k in receives]


def couple(per_rank: Mapping[int, Any], hccl: Mapping[int, pd.DataFrame]) -> int:
    """Re-time the ranks' what-ifs with each transfer meeting its other end (see the module docstring); the
    rounds it took (0: no point-to-point transfer)."""
    links = pairs(per_rank, hccl)
    if not links:
        return 0
    graphs = {r: {g.iteration: g for g in w.graphs} for r, w in per_rank.items()}
    transfer = {}
    for a, b, scale in links:
        ga, gb = graphs[a[0]][a[1]], graphs[b[0]][b[1]]
        recorded = int(ga.finish[a[2]]) - max(int(ga.start[a[2]]), int(gb.start[b[2]]))
        transfer[a] = int(max(recorded, 0) * scale + 0.5)
    for rounds in range(1, MAX_ROUNDS + 1):
        moved = False
        for rank, w in per_rank.items():
            meets: dict[int, dict[int, tuple[int, int]]] = {}
            for a, b, _ in links:
                for me, other in ((a, b), (b, a)):
                    if me[0] == rank:
                        start = int(per_rank[other[0]].starts[other[1]][other[2]])
                        meets.setdefault(me[1], {})[me[2]] = (start, transfer[a])
            before = {it: s.copy() for it, s in w.starts.items()}
            w.repredict(meets)
            moved |= any(not np.array_equal(before[it], s) for it, s in w.starts.items())
        if not moved:
            return rounds
    return MAX_ROUNDS

"""Pipeline-parallel schedules: in which order each stage runs the forward and backward passes of its
micro-batches, as Megatron-core's ``forward_backward_pipelining_without_interleaving`` (1F1B) and
``..._with_interleaving`` (interleaved 1F1B, ``virtual_stages`` model chunks per stage) order them.

1F1B: stage ``s`` of ``p`` runs ``min(p - s - 1, m)`` warm-up forwards, then alternates one forward and
one backward, then the cool-down backwards.  Interleaved: stage ``s`` holds model chunks ``c`` (virtual
stage ``c * p + s``); its warm-up is ``(p - s - 1) * 2 + (v - 1) * p`` forwards (at most ``v * m``), and
micro-batches go through the chunks in groups of ``p``.  With uniform stages the idle share of a step is
``(p - 1) / (m + p - 1)`` (1F1B) and ``(p - 1) / (v * m + p - 1)`` (interleaved).

Activations and gradients move between neighbouring virtual stages (the last stage's chunk ``c`` feeds
stage 0's chunk ``c + 1``); :func:`transfers` says what each action receives before it runs and sends
after, with the tag both ends share (HcomSend / HcomReceive ``sr_tag``).
"""

from __future__ import annotations

from dataclasses import dataclass

FORWARD, BACKWARD = "forward", "backward"


@dataclass(frozen=True)
class Action:
    """One pass of one micro-batch through one model chunk of a stage."""

    kind: str  # FORWARD or BACKWARD
    micro_batch: int
    chunk: int


@dataclass(frozen=True)
class Transfer:
    """An activation (forward) or gradient (backward) moving between two stages."""

    direction: str  # FORWARD or BACKWARD
    peer_stage: int
    tag: int  # the sr_tag both ends use
    micro_batch: int
    virtual_stage: int  # the receiving virtual stage


def schedule(pp: int, micro_batches: int, virtual_stages: int = 1) -> list[list[Action]]:
    """The actions of every stage, in the order it runs them."""
    if virtual_stages == 1:
        return [_one_f_one_b(pp, s, micro_batches) for s in range(pp)]
    return [_interleaved(pp, s, micro_batches, virtual_stages) for s in range(pp)]


def _one_f_one_b(pp: int, stage: int, m: int) -> list[Action]:
    warmup = min(pp - stage - 1, m)
    out = [Action(FORWARD, j, 0) for j in range(warmup)]
    for i in range(m - warmup):
        out += [Action(FORWARD, warmup + i, 0), Action(BACKWARD, i, 0)]
    return out + [Action(BACKWARD, i, 0) for i in range(m - warmup, m)]


def _interleaved(pp: int, stage: int, m: int, v: int) -> list[Action]:
    total = m * v
    # Megatron: with as many micro-batches as stages every forward is a warm-up forward
    warmup = total if m == pp else min((pp - stage - 1) * 2 + (v - 1) * pp, total)

    def action(k: int, kind: str) -> Action:
        group, within = divmod(k, pp * v)
        chunk = within // pp
        if kind == BACKWARD:
            chunk = v - chunk - 1
        return Action(kind, group * pp + within % pp, chunk)

    out = [action(k, FORWARD) for k in range(warmup)]
    for i in range(total - warmup):
        out += [action(warmup + i, FORWARD), action(i, BACKWARD)]
    return out + [action(i, BACKWARD) for i in range(total - warmup, total)]


def virtual_stage(pp: int, stage: int, chunk: int) -> int:
    return chunk * pp + stage


def _tag(direction: str, receiving_virtual_stage: int, micro_batch: int, micro_batches: int) -> int:
    return (receiving_virtual_stage * micro_batches + micro_batch) * 2 + (direction == BACKWARD)


def transfers(pp: int, virtual_stages: int, micro_batches: int, stage: int, a: Action
              ) -> tuple[Transfer | None, Transfer | None]:
    """What action ``a`` of ``stage`` receives before it runs and sends when it is done (``None``: the
    first virtual stage receives no activation, the last one no gradient)."""
    last = pp * virtual_stages - 1
    vs = virtual_stage(pp, stage, a.chunk)
    if a.kind == FORWARD:
        recv = None if vs == 0 else Transfer(FORWARD, (stage - 1) % pp, _tag(FORWARD, vs, a.micro_batch,
                                                                             micro_batches), a.micro_batch, vs)
        send = None if vs == last else Transfer(FORWARD, (stage + 1) % pp, _tag(FORWARD, vs + 1, a.micro_batch,
                                                                                micro_batches), a.micro_batch, vs + 1)
    else:
        recv = None if vs == last else Transfer(BACKWARD, (stage + 1) % pp, _tag(BACKWARD, vs, a.micro_batch,
                                                                                 micro_batches), a.micro_batch, vs)
        send = None if vs == 0 else Transfer(BACKWARD, (stage - 1) % pp, _tag(BACKWARD, vs - 1, a.micro_batch,
                                                                              micro_batches), a.micro_batch, vs - 1)
    return recv, send

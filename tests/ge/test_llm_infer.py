"""Inference graphs of ge.models.llm: the KV cache arithmetic, the op types of each phase, the costs of the
inference attention ops by hand, decode memory-bound and prefill compute-bound, the step time's trends."""

from __future__ import annotations

import pytest

from geprof_nb import ge
from geprof_nb.ge.device import PRESETS
from geprof_nb.ge.llm_config import llm_config
from geprof_nb.ge.llm_infer import kv_bytes_per_token
from geprof_nb.ge.ops import op_cost
from helpers.geprof_testing import step_times_us

LLAMA3 = llm_config("llama3-8b")


def _types(g):
    out = {}
    for n in g.nodes:
        out[n.type] = out.get(n.type, 0) + 1
    return out


def test_kv_bytes_per_token_per_layer_is_two_kv_heads_head_dim_dtype():
    assert kv_bytes_per_token(LLAMA3) == 2 * 8 * 128 * 2 == 4096
    assert kv_bytes_per_token(LLAMA3, tp=2) == 2 * 4 * 128 * 2
    assert kv_bytes_per_token(llm_config("llama2-7b")) == 2 * 32 * 128 * 2


def test_the_cache_variables_and_their_writes_hold_that_many_bytes_per_token():
    g = ge.models.llm("llama3-8b", training=False, phase="decode", batch_size=4, kv_len=300, kv_blocks=40,
                      layers=2)
    caches = [n for n in g.nodes if n.type == "Variable" and n.name.endswith("_cache")]
    assert len(caches) == 2 * 2  # a key and a value cache per layer
    per_layer = sum(n.outputs[0].nbytes for n in caches) // 2
    assert per_layer == 40 * 128 * kv_bytes_per_token(LLAMA3)
    writes = [n for n in g.nodes if n.type == "ScatterPaKvCache"]
    # one new token per sequence: its key and value read and written
    assert [op_cost(n).bytes_out for n in writes] == [4 * kv_bytes_per_token(LLAMA3)] * 2


def test_op_types_of_prefill_decode_and_a_prefill_chunk():
    pre = _types(ge.models.llm("tiny-llama", training=False, phase="prefill", batch_size=2, seq_len=64))
    assert pre["PromptFlashAttention"] == pre["ScatterPaKvCache"] == 8
    assert "IncreFlashAttention" not in pre and "FlashAttentionScore" not in pre
    dec = _types(ge.models.llm("tiny-llama", training=False, phase="decode", batch_size=2, kv_len=64))
    assert dec["IncreFlashAttention"] == dec["ScatterPaKvCache"] == 8 and "PromptFlashAttention" not in dec
    chunk = _types(ge.models.llm("tiny-llama", training=False, phase="prefill", batch_size=1, seq_len=64,
                                 kv_len=192))
    assert chunk["FusedInferAttentionScore"] == 8
    tp = _types(ge.models.llm("tiny-llama", training=False, phase="decode", batch_size=2, kv_len=64,
                              parallel=ge.Parallel(tp=2)))
    # the embedding's, and o_proj's and down_proj's of each layer; the logits gathered over the vocabulary
    assert tp["HcomAllReduce"] == 1 + 2 * 8 and tp["HcomAllGather"] == 1
    for phase_types in (pre, dec, chunk):
        assert "ApplyAdamW" not in phase_types and not any(t.endswith("Grad") for t in phase_types)


def test_incre_flash_attention_reads_the_blocks_of_its_table():
    g = ge.models.llm("llama3-8b", training=False, phase="decode", batch_size=3, kv_len=200, kv_blocks=16,
                      layers=1)
    ifa = next(n for n in g.nodes if n.type == "IncreFlashAttention")
    c = op_cost(ifa)
    kv_tokens = 2 * 128  # 200 tokens fill 2 blocks of 128, read whole
    n, d = 32, 128
    assert c.flops == 2 * 2 * 3 * n * kv_tokens * d
    kv_read = 2 * 3 * kv_tokens * 8 * d * 2
    q = 3 * n * d * 2
    assert c.bytes_in == q + kv_read + 3 * 2 * 4  # the query, the key and value blocks, the block table
    assert c.bytes_out == q


def test_prompt_chunk_attends_causally_to_its_prefix_and_itself():
    g = ge.models.llm("tiny-llama", training=False, phase="prefill", batch_size=1, seq_len=64, kv_len=192,
                      layers=1)
    fia = next(n for n in g.nodes if n.type == "FusedInferAttentionScore")
    heads, d, s, kv = 4, 64, 64, 256  # 192 tokens read as 2 blocks of 128
    assert op_cost(fia).flops == 2 * 2 * heads * (s * kv - s * (s - 1) // 2) * d


def _roofline_times(g, device="Ascend910B"):
    dev = PRESETS[device]
    peak = dev.ai_core_num * dev.cube_flops_per_cycle * dev.aic_frequency_mhz * 1e6
    costs = [op_cost(n) for n in g.nodes]
    return sum(c.flops for c in costs) / peak, sum(c.bytes for c in costs) / dev.hbm_bandwidth


def test_decode_is_memory_bound_and_a_long_prefill_compute_bound():
    compute, memory = _roofline_times(ge.models.llm("llama3-8b", training=False, phase="decode", batch_size=8,
                                                    kv_len=2048))
    assert memory > 20 * compute
    compute, memory = _roofline_times(ge.models.llm("llama3-8b", training=False, phase="prefill", batch_size=1,
                                                    seq_len=4096))
    assert compute > 3 * memory


def test_decode_step_time_grows_with_batch_and_kv_len(tmp_path):
    def dec(b, kv):
        return ge.models.llm("llama3-8b", training=False, phase="decode", batch_size=b, kv_len=kv, layers=4)

    by_batch = step_times_us(tmp_path / "batch", [dec(b, 1024) for b in (1, 8, 32, 128)])
    by_kv = step_times_us(tmp_path / "kv", [dec(16, kv) for kv in (256, 1024, 4096, 8192)])
    assert by_batch == sorted(by_batch) and by_batch[-1] > 1.5 * by_batch[0]
    assert by_kv == sorted(by_kv) and by_kv[-1] > 1.5 * by_kv[0]


@pytest.mark.parametrize("kwargs, message", [
    ({"phase": "decode", "batch_size": 1, "kv_len": 9000}, "kv_len=9000 is longer than the context of llama3-8b "
                                                            "(8192 tokens)"),
    ({"phase": "decode", "batch_size": 2, "kv_len": 300, "kv_blocks": 5}, "kv_blocks=5 cannot hold 2 sequences"),
    ({"phase": "decode", "batch_size": 2}, "phase='decode' needs kv_len"),
    ({"phase": "decode", "kv_len": 64, "seq_len": 64}, "seq_len=64 with phase='decode'"),
    ({"phase": "prefill", "seq_len": 64, "training": True}, "pass training=False"),
    ({"phase": "prefill", "seq_len": 64, "batch_size": 0}, "batch_size must be an int >= 1, got 0"),
    ({"phase": "serve", "seq_len": 64}, "phase must be one of prefill, decode, got 'serve'"),
    ({"phase": "decode", "kv_len": 64, "parallel": ge.Parallel(pp=2)}, "Parallel: pp=2: inference graphs"),
    ({"phase": "decode", "kv_len": 64, "parallel": ge.Parallel(tp=3)}, "tp=3 must divide heads=32"),
])
def test_bad_inference_shapes_are_refused_naming_the_field(kwargs, message):
    kwargs = {"training": False, **kwargs}
    with pytest.raises(ge.GraphBuildError) as err:
        ge.models.llm("llama3-8b", **kwargs)
    assert message in str(err.value)


def test_a_long_prefill_runs_near_the_cube_peak_and_a_decode_far_below(tmp_path):
    """Compute-bound at long prompts: the step's FLOPs over its simulated time reach most of the bf16 cube peak
    (24 AI Cores x 8192 FLOPs a cycle x 1.8 GHz) and the time nearly doubles with the prompt (attention grows faster,
    fixed per-step costs do not); a
    decode step at batch 8 reaches a few per cent of it (memory-bound)."""
    dev = PRESETS["Ascend910B"]
    peak = dev.ai_core_num * dev.cube_flops_per_cycle * dev.aic_frequency_mhz * 1e6
    lens = (1024, 2048, 4096)
    graphs = [ge.models.llm("llama3-8b", training=False, phase="prefill", batch_size=1, seq_len=s, layers=4)
              for s in lens]
    graphs.append(ge.models.llm("llama3-8b", training=False, phase="decode", batch_size=8, kv_len=2048, layers=4))
    times = step_times_us(tmp_path, graphs)
    rates = [sum(op_cost(n).flops for n in g.nodes) / (t * 1e-6) / peak for g, t in zip(graphs, times)]
    assert min(rates[:3]) > 0.6, rates
    assert times[1] >= 1.8 * times[0] and times[2] >= 1.8 * times[1], times
    assert rates[3] < 0.05, rates

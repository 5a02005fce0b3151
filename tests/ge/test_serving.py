"""ge.requests and ge.serve: the request stream, the scheduler's steps and KV-cache blocks, bad input."""

from __future__ import annotations

import numpy as np
import pytest

from geprof_nb import ge
from geprof_nb.errors import ServingError
from helpers.geprof_testing import serve_profiled


def test_requests_same_seed_same_stream_poisson_arrivals():
    a = ge.requests(200, prompt_len=(16, 64), output_len=8, rate=50.0, seed=3)
    assert a == ge.requests(200, prompt_len=(16, 64), output_len=8, rate=50.0, seed=3)
    assert a != ge.requests(200, prompt_len=(16, 64), output_len=8, rate=50.0, seed=4)
    arrivals = np.array([r.arrival_s for r in a])
    assert np.all(np.diff(arrivals) >= 0) and 0.6 < (len(a) / arrivals[-1]) / 50.0 < 1.4
    assert {r.output_len for r in a} == {8} and all(16 <= r.prompt_len <= 64 for r in a)
    at_once = ge.requests(3, prompt_len=[5, 6, 7], output_len=2, rate=None)
    assert [(r.id, r.arrival_s, r.prompt_len) for r in at_once] == [(0, 0.0, 5), (1, 0.0, 6), (2, 0.0, 7)]


@pytest.mark.parametrize("kwargs, message", [
    ({"rate": -1.0}, "requests: rate must be > 0 requests/s (or None: all at once), got -1.0"),
    ({"n": 0}, "requests: n must be an int >= 1, got 0"),
    ({"prompt_len": [1, 2]}, "requests: prompt_len has 2 lengths for n=4 requests"),
    ({"output_len": (9, 3)}, "requests: output_len=(9, 3) must be a range 1 <= low <= high"),
    ({"prompt_len": 0}, "requests: prompt_len must be >= 1 token, got 0"),
])
def test_bad_request_streams_are_refused_naming_the_field(kwargs, message):
    args = {"n": 4, "prompt_len": 8, "output_len": 4, "rate": 1.0, **kwargs}
    with pytest.raises(ServingError) as err:
        ge.requests(**args)
    assert str(err.value) == message


@pytest.mark.parametrize("kwargs, message", [
    ({"requests": [ge.Request(0, 0.0, 2000, 100)]},
     "serve: request 0: prompt_len + output_len = 2100 tokens is longer than the context of tiny-llama (2048 tokens)"),
    ({"kv_cache_blocks": 2, "requests": [ge.Request(0, 0.0, 300, 100)]},
     "serve: kv_cache_blocks=2 is smaller than one request: request 0 needs 4 blocks of 128 tokens (300 prompt + "
     "100 output)"),
    ({"max_batch_size": 0}, "serve: max_batch_size must be an int >= 1, got 0"),
    ({"scheduler": "fifo"}, "serve: scheduler must be one of continuous, static, got 'fifo'"),
    ({"requests": []}, "serve: requests must be a non-empty list of ge.requests(...)"),
])
def test_bad_serving_input_is_refused_naming_the_field(kwargs, message):
    args = {"requests": [ge.Request(0, 0.0, 8, 4)], "max_batch_size": 4, **kwargs}
    with pytest.raises(ServingError) as err:
        ge.serve("tiny-llama", **args)
    assert str(err.value) == message


def test_every_request_gets_its_tokens_and_the_blocks_come_back(tmp_path):
    reqs = ge.requests(12, prompt_len=(20, 300), output_len=(1, 40), rate=200.0, seed=5)
    result, prof = serve_profiled(tmp_path, requests=reqs, max_batch_size=4, kv_cache_blocks=64)
    r, s = prof.serving_requests, prof.serving_steps
    assert r["request_id"].tolist() == list(range(12))
    assert r["output_tokens"].tolist() == [q.output_len for q in reqs]
    assert result.output_tokens == sum(q.output_len for q in reqs) and result.steps == len(s)
    assert (s["batch_size"] <= 4).all()
    assert (s["kv_blocks_used"] + s["kv_blocks_free"] == 64).all()
    assert s["kv_blocks_used"].iloc[-1] == 0  # the last request finished: every block free again
    # without chunked prefill a step is a prefill or a decode, never both
    assert set(s["phase"]) == {"prefill", "decode"}
    # a decode step decodes one token per sequence: the tokens add up
    first_tokens = s.loc[s["phase"] == "prefill", "prefill_seqs"].sum()
    assert first_tokens + s["decode_seqs"].sum() == result.output_tokens


def test_chunked_prefill_splits_a_long_prompt_and_decodes_beside_it(tmp_path):
    reqs = [ge.Request(0, 0.0, 64, 30), ge.Request(1, 0.01, 1500, 4)]
    _, prof = serve_profiled(tmp_path, requests=reqs, max_batch_size=4, chunked_prefill=True, max_num_tokens=512)
    s = prof.serving_steps
    assert (s["prefill_tokens"] + s["decode_seqs"] <= 512).all()
    mixed = s[s["phase"] == "mixed"]
    # request 1's 1500 tokens: chunks of 511 beside request 0's decode, the last one shorter
    assert mixed["prefill_tokens"].sum() == 1500 and len(mixed) == 3
    assert mixed["prefill_tokens"].tolist() == [511, 511, 478]


def test_a_small_kv_cache_preempts_and_says_so(tmp_path, capsys):
    reqs = ge.requests(8, prompt_len=100, output_len=200, rate=None)
    result, prof = serve_profiled(tmp_path, requests=reqs, max_batch_size=8, kv_cache_blocks=12)
    assert "serve: the KV cache (12 blocks of 128 tokens) ran out" in capsys.readouterr().err
    r, s = prof.serving_requests, prof.serving_steps
    assert result.preemptions > 0
    assert r["preemptions"].sum() == s["preempted"].sum() == result.preemptions
    assert r["output_tokens"].tolist() == [200] * 8
    assert (s["kv_blocks_used"] <= 12).all()

"""The Prometheus text parser against what the engines really print (the fake engine's
metrics.py writes the vLLM and SGLang names; a captured sglang-router answer is below)."""

from __future__ import annotations

import pytest

from inkctl.client.prometheus import MetricsError, engine_load, parse
from inkctl.recipe.engine_registry import spec_of
from tests.cluster.fake_engine.metrics import Metrics

# sglang-router 0.3.2's exporter, as it answered on the test machine (blank lines included)
ROUTER = '''# TYPE smg_router_requests_total counter
smg_router_requests_total{router_type="http",backend_type="regular",connection_mode="http",model="fake",endpoint="chat",streaming="true"} 3

smg_worker_health{worker="http://127.0.0.1:28101"} 1
smg_worker_health{worker="http://127.0.0.1:28102"} 0
'''


@pytest.mark.parametrize("flavour", ["vllm", "sglang"])
def test_engine_load_from_two_scrapes(flavour):
    m = Metrics()
    before = parse(m.text(flavour, "fake"))
    for ttft in (0.02, 0.03, 0.2):
        m.started(5)
        m.first_token(ttft)
        m.finished_one(10, ttft + 0.1, "stop")
    m.started(5)  # one still running
    now = parse(m.text(flavour, "fake"))
    load = engine_load(spec_of(flavour).metrics, now, before, 2.0)
    assert load.running == 1 and load.waiting == 0
    assert load.gen_tokens_per_s == pytest.approx(15.0)
    assert load.requests == 3
    assert 0.02 < load.ttft_p50_s <= 0.04
    assert load.ttft_mean_s == pytest.approx(0.25 / 3)
    assert 0 < load.kv_usage < 1


def test_names_are_the_engines_own():
    v = parse(Metrics().text("vllm", "m"))
    s = parse(Metrics().text("sglang", "m"))
    for name in ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
                 "vllm:generation_tokens_total", "vllm:time_to_first_token_seconds_bucket"):
        assert v.has(name), name
    for name in ("sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:token_usage",
                 "sglang:generation_tokens_total", "sglang:time_to_first_token_seconds_bucket"):
        assert s.has(name), name
    assert v.types["vllm:time_to_first_token_seconds"] == "histogram"
    assert v.histogram(spec_of("vllm").metrics.ttft).buckets[-1][0] == float("inf")
    assert s.histogram(spec_of("sglang").metrics.e2e).count == 0


def test_router_exposition_and_labels():
    sc = parse(ROUTER)
    assert sc.total(("smg_router_requests_total",)) == 3
    health = {x.label("worker"): x.value for x in sc.values("smg_worker_health")}
    assert health == {"http://127.0.0.1:28101": 1, "http://127.0.0.1:28102": 0}


def test_quantile_interpolates_like_prometheus():
    text = "\n".join(['h_bucket{le="1"} 0', 'h_bucket{le="2"} 10', 'h_bucket{le="+Inf"} 10', "h_sum 15", "h_count 10"])
    h = parse(text).histogram(("h",))
    assert h.quantile(0.5) == pytest.approx(1.5)
    assert h.mean == 1.5


def test_escaped_label_values_and_bad_lines():
    sc = parse('x{a="q\\"uote",b="c,d"} 1.5e3')
    assert sc.samples[0].labels == (("a", 'q"uote'), ("b", "c,d")) and sc.samples[0].value == 1500
    with pytest.raises(MetricsError, match="line 2"):
        parse("ok 1\nnot a sample at all\n")

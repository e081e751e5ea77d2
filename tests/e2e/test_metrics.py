"""GET /metrics: valid Prometheus text (checked by promtool) whose counters move."""

import shutil
import subprocess

import pytest
import requests

from conftest import post_json


def test_promtool_accepts_metrics(base_url):
    if not shutil.which("promtool"):
        pytest.skip("promtool not installed")
    r = requests.get(base_url + "/metrics")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain; version=0.0.4")
    check = subprocess.run(["promtool", "check", "metrics"], input=r.text, capture_output=True,
                           text=True)
    assert check.returncode == 0, check.stdout + check.stderr


def test_vllm_named_metrics_present(server):
    m = server.metrics()
    for name in ["inflight_num_requests_running", "inflight_num_requests_waiting",
                 "inflight_kv_cache_usage_perc", "inflight_prefix_cache_queries_total",
                 "inflight_prefix_cache_hits_total", "inflight_num_preemptions_total",
                 "inflight_prompt_tokens_total", "inflight_generation_tokens_total",
                 "inflight_time_to_first_token_seconds_count",
                 "inflight_inter_token_latency_seconds_count",
                 "inflight_e2e_request_latency_seconds_count",
                 "inflight_request_queue_time_seconds_count",
                 'inflight_time_to_first_token_seconds_bucket{le="+Inf"}',
                 'inflight_request_success_total{finished_reason="length"}']:
        assert name in m, name


def test_counters_move(server, base_url):
    before = server.metrics()
    post_json(base_url + "/v1/completions", {"prompt": "Counting tokens", "max_tokens": 3,
                                             "temperature": 0, "ignore_eos": True})
    after = server.metrics()
    assert after["inflight_generation_tokens_total"] - before[
        "inflight_generation_tokens_total"] == 3
    assert after["inflight_prompt_tokens_total"] > before["inflight_prompt_tokens_total"]
    assert after["inflight_e2e_request_latency_seconds_count"] == \
        before["inflight_e2e_request_latency_seconds_count"] + 1
    assert after["inflight_time_to_first_token_seconds_count"] == \
        before["inflight_time_to_first_token_seconds_count"] + 1
    assert after['inflight_request_success_total{finished_reason="length"}'] == \
        before['inflight_request_success_total{finished_reason="length"}'] + 1
    assert after["inflight_http_requests_total"] > before["inflight_http_requests_total"]
    assert after["inflight_http_streamed_tokens_total"] >= \
        before["inflight_http_streamed_tokens_total"] + 3
    assert after["inflight_num_requests_running"] == 0

"""GET /metrics of the fake engine, in the Prometheus text format and with the names the real
engines export, so that inkctl's readers (top, export prometheus, a stuck-engine check) are
tested against what vLLM and SGLang really say:

- vLLM (v1 engine, vllm/v1/metrics/loggers.py): vllm:num_requests_running, vllm:num_requests_waiting,
  vllm:kv_cache_usage_perc, vllm:prompt_tokens_total, vllm:generation_tokens_total,
  vllm:request_success_total{finished_reason}, vllm:time_to_first_token_seconds and
  vllm:e2e_request_latency_seconds (histograms); labels model_name (and engine).
- TensorRT-LLM (tensorrt_llm/metrics/collector.py, at /prometheus/metrics; its /metrics is JSON
  iteration stats): trtllm_num_requests_running, trtllm_num_requests_waiting,
  trtllm_kv_cache_utilization, trtllm_prompt_tokens_total, trtllm_generation_tokens_total,
  trtllm_request_success_total{finished_reason}, trtllm_time_to_first_token_seconds and
  trtllm_e2e_request_latency_seconds; labels model_name and engine_type.
- SGLang (python/sglang/srt/metrics/collector.py): sglang:num_running_reqs, sglang:num_queue_reqs,
  sglang:token_usage, sglang:gen_throughput, sglang:prompt_tokens_total,
  sglang:generation_tokens_total, sglang:num_requests_total, sglang:time_to_first_token_seconds and
  sglang:e2e_request_latency_seconds (histograms); label model_name.

The counters count what this engine really served (requests, tokens), so a test can tell
which replica a router sent a request to.
"""

import threading
import time

# the buckets the engines declare (vLLM's TTFT buckets; SGLang's are close enough to share)
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
                20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
E2E_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
               480.0, 960.0, 1920.0, 7680.0)


class Histogram:
    def __init__(self, buckets):
        self.buckets, self.counts, self.sum, self.count = buckets, [0] * len(buckets), 0.0, 0

    def observe(self, v):
        self.sum += v
        self.count += 1
        for i, b in enumerate(self.buckets):
            if v <= b:
                self.counts[i] += 1

    def lines(self, name, labels):
        out = [f"# TYPE {name} histogram"]
        for b, c in zip(self.buckets, self.counts):
            out.append(f'{name}_bucket{{{labels},le="{b}"}} {float(c)}')
        out.append(f'{name}_bucket{{{labels},le="+Inf"}} {float(self.count)}')
        out.append(f"{name}_count{{{labels}}} {float(self.count)}")
        out.append(f"{name}_sum{{{labels}}} {self.sum}")
        return out


class Metrics:
    """What one engine has served, as the engines count it."""

    def __init__(self):
        self.lock = threading.Lock()
        self.running = 0
        self.waiting = 0
        self.requests = 0
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.finished = {}  # finished_reason -> count
        self.ttft = Histogram(TTFT_BUCKETS)
        self.e2e = Histogram(E2E_BUCKETS)
        self.recent = []  # (monotonic time, tokens) of the last seconds: sglang:gen_throughput

    def queued(self, d):
        with self.lock:
            self.waiting += d

    def started(self, prompt_tokens):
        with self.lock:
            self.running += 1
            self.prompt_tokens += prompt_tokens

    def first_token(self, seconds):
        with self.lock:
            self.ttft.observe(seconds)

    def finished_one(self, tokens, seconds, reason):
        with self.lock:
            self.running -= 1
            self.requests += 1
            self.generation_tokens += tokens
            self.finished[reason] = self.finished.get(reason, 0) + 1
            self.e2e.observe(seconds)
            now = time.monotonic()
            self.recent = [(t, n) for t, n in self.recent if now - t < 10] + [(now, tokens)]

    def text(self, flavour, model, max_running=256):
        with self.lock:
            lines = {"vllm": self._vllm, "trtllm": self._trtllm}.get(flavour, self._sglang)(model, max_running)
            return "\n".join(lines) + "\n"

    def iteration_stats(self):
        """TensorRT-LLM's /metrics: the latest iteration's stats as a JSON list."""
        with self.lock:
            return [{"iter": self.requests, "numActiveRequests": self.running, "numQueuedRequests": self.waiting,
                     "maxNumActiveRequests": 64, "gpuMemUsage": 0, "cpuMemUsage": 0, "pinnedMemUsage": 0,
                     "kvCacheStats": {"maxNumBlocks": 2710, "freeNumBlocks": 2710 - self.running,
                                      "usedNumBlocks": self.running, "tokensPerBlock": 32}}]

    def _trtllm(self, model, max_running):
        """tensorrt_llm/metrics/collector.py: prefix trtllm_, labels model_name and engine_type."""
        lab = f'engine_type="trtllm",model_name="{model}"'
        out = [
            "# HELP trtllm_num_requests_running Number of active requests",
            "# TYPE trtllm_num_requests_running gauge",
            f"trtllm_num_requests_running{{{lab}}} {float(self.running)}",
            "# HELP trtllm_num_requests_waiting Number of queued requests",
            "# TYPE trtllm_num_requests_waiting gauge",
            f"trtllm_num_requests_waiting{{{lab}}} {float(self.waiting)}",
            "# HELP trtllm_kv_cache_utilization KV cache utilization",
            "# TYPE trtllm_kv_cache_utilization gauge",
            f"trtllm_kv_cache_utilization{{{lab}}} {min(1.0, self.running / max_running)}",
            "# HELP trtllm_prompt_tokens_total Cumulative number of prompt (input) tokens processed.",
            "# TYPE trtllm_prompt_tokens_total counter",
            f"trtllm_prompt_tokens_total{{{lab}}} {float(self.prompt_tokens)}",
            "# HELP trtllm_generation_tokens_total Cumulative number of generation (output) tokens produced.",
            "# TYPE trtllm_generation_tokens_total counter",
            f"trtllm_generation_tokens_total{{{lab}}} {float(self.generation_tokens)}",
            "# HELP trtllm_request_success_total Count of successfully processed requests.",
            "# TYPE trtllm_request_success_total counter",
        ]
        for reason in sorted(set(self.finished) | {"stop", "length"}):
            out.append(f'trtllm_request_success_total{{{lab},finished_reason="{reason}"}} {float(self.finished.get(reason, 0))}')
        out.append("# HELP trtllm_time_to_first_token_seconds Histogram of time to first token in seconds.")
        out += self.ttft.lines("trtllm_time_to_first_token_seconds", lab)
        out.append("# HELP trtllm_e2e_request_latency_seconds Histogram of end to end request latency in seconds.")
        out += self.e2e.lines("trtllm_e2e_request_latency_seconds", lab)
        return out

    def _vllm(self, model, max_running):
        lab = f'engine="0",model_name="{model}"'
        out = [
            "# HELP vllm:num_requests_running Number of requests in model execution batches.",
            "# TYPE vllm:num_requests_running gauge",
            f"vllm:num_requests_running{{{lab}}} {float(self.running)}",
            "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.",
            "# TYPE vllm:num_requests_waiting gauge",
            f"vllm:num_requests_waiting{{{lab}}} {float(self.waiting)}",
            "# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.",
            "# TYPE vllm:kv_cache_usage_perc gauge",
            f"vllm:kv_cache_usage_perc{{{lab}}} {min(1.0, self.running / max_running)}",
            "# HELP vllm:prompt_tokens_total Number of prefill tokens processed.",
            "# TYPE vllm:prompt_tokens_total counter",
            f"vllm:prompt_tokens_total{{{lab}}} {float(self.prompt_tokens)}",
            "# HELP vllm:generation_tokens_total Number of generation tokens processed.",
            "# TYPE vllm:generation_tokens_total counter",
            f"vllm:generation_tokens_total{{{lab}}} {float(self.generation_tokens)}",
            "# HELP vllm:request_success_total Count of successfully processed requests.",
            "# TYPE vllm:request_success_total counter",
        ]
        for reason in sorted(set(self.finished) | {"stop", "length", "abort"}):
            out.append(f'vllm:request_success_total{{{lab},finished_reason="{reason}"}} {float(self.finished.get(reason, 0))}')
        out.append("# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.")
        out += self.ttft.lines("vllm:time_to_first_token_seconds", lab)
        out.append("# HELP vllm:e2e_request_latency_seconds Histogram of e2e request latency in seconds.")
        out += self.e2e.lines("vllm:e2e_request_latency_seconds", lab)
        return out

    def _sglang(self, model, max_running):
        lab = f'model_name="{model}"'
        now = time.monotonic()
        recent = [(t, n) for t, n in self.recent if now - t < 10]
        tput = sum(n for _, n in recent) / 10.0
        out = [
            "# HELP sglang:num_running_reqs The number of running requests.",
            "# TYPE sglang:num_running_reqs gauge",
            f"sglang:num_running_reqs{{{lab}}} {float(self.running)}",
            "# HELP sglang:num_queue_reqs The number of requests in the waiting queue.",
            "# TYPE sglang:num_queue_reqs gauge",
            f"sglang:num_queue_reqs{{{lab}}} {float(self.waiting)}",
            "# HELP sglang:token_usage The token usage.",
            "# TYPE sglang:token_usage gauge",
            f"sglang:token_usage{{{lab}}} {min(1.0, self.running / max_running)}",
            "# HELP sglang:gen_throughput The generation throughput (token/s).",
            "# TYPE sglang:gen_throughput gauge",
            f"sglang:gen_throughput{{{lab}}} {tput}",
            "# HELP sglang:prompt_tokens_total Number of prefill tokens processed.",
            "# TYPE sglang:prompt_tokens_total counter",
            f"sglang:prompt_tokens_total{{{lab}}} {float(self.prompt_tokens)}",
            "# HELP sglang:generation_tokens_total Number of generation tokens processed.",
            "# TYPE sglang:generation_tokens_total counter",
            f"sglang:generation_tokens_total{{{lab}}} {float(self.generation_tokens)}",
            "# HELP sglang:num_requests_total Number of requests processed.",
            "# TYPE sglang:num_requests_total counter",
            f"sglang:num_requests_total{{{lab}}} {float(self.requests)}",
            "# HELP sglang:time_to_first_token_seconds Histogram of time to first token in seconds.",
        ]
        out += self.ttft.lines("sglang:time_to_first_token_seconds", lab)
        out.append("# HELP sglang:e2e_request_latency_seconds Histogram of End-to-end request latency in seconds")
        out += self.e2e.lines("sglang:e2e_request_latency_seconds", lab)
        return out

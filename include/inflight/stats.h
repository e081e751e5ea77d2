// EngineStats: a consistent snapshot of the engine's counters, gauges and latency histograms,
// for the server's Prometheus endpoint and for tests. Histogram bucket bounds follow vLLM's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace inflight {

struct Histogram {
  std::vector<double> bounds;    // upper bounds (seconds), increasing; +Inf is implicit
  std::vector<uint64_t> counts;  // per bucket, not cumulative: [bounds.size() + 1]
  double sum = 0.0;
  uint64_t count = 0;

  explicit Histogram(std::vector<double> upper_bounds = {});
  void observe(double value);
  // Observations <= bounds[i] (Prometheus `le` buckets are cumulative).
  uint64_t cumulative(size_t i) const;
};

struct EngineStats {
  // ---- gauges ----------------------------------------------------------------------------
  int64_t num_running = 0;  // sequences holding KV blocks (those of the step in flight among them)
  int64_t num_waiting = 0;  // sequences queued (new or preempted), requests not yet admitted
  int64_t num_kv_blocks = 0;
  int64_t num_free_kv_blocks = 0;  // includes unreferenced cached blocks (evictable)
  double kv_usage = 0.0;           // 1 - free / total

  // ---- counters (since start) --------------------------------------------------------------
  uint64_t num_requests_enqueued = 0;
  uint64_t num_requests_finished = 0;
  uint64_t num_requests_stopped = 0;      // finish reason stop
  uint64_t num_requests_length = 0;       // finish reason length
  uint64_t num_requests_aborted = 0;      // cancelled or aborted at shutdown
  uint64_t num_requests_failed = 0;       // finish reason error
  uint64_t num_prompt_tokens = 0;         // prompt tokens of finished requests
  uint64_t num_generation_tokens = 0;     // tokens sampled
  uint64_t num_computed_tokens = 0;       // tokens run through the model (incl. recomputation)
  uint64_t num_prefix_cache_queries = 0;  // prompt tokens looked up in the prefix cache
  uint64_t num_prefix_cache_hits = 0;     // of which found
  uint64_t num_preemptions = 0;
  uint64_t num_steps = 0;
  // Device time of steps, where the device keeps a timeline (CUDA; zero on the CPU): busy from
  // each step's first device op to its last, idle between one step's end and the next one's
  // start while steps follow each other (time the engine waits for requests is not counted).
  double device_busy_seconds = 0.0;
  double device_idle_seconds = 0.0;
  // Structured output: token bitmasks filled (one per constrained row and step) and the host
  // time spent filling them (all threads' work in wall time, masks filled in parallel).
  uint64_t num_grammar_masks = 0;
  double grammar_mask_seconds = 0.0;

  // ---- histograms (seconds) ----------------------------------------------------------------
  Histogram queue_time;           // arrival -> first scheduled
  Histogram time_to_first_token;  // arrival -> first token
  Histogram inter_token_latency;  // between consecutive tokens of one choice
  Histogram e2e_latency;          // arrival -> finished
  Histogram step_time;            // one engine step (schedule .. emit)

  EngineStats();
};

}  // namespace inflight

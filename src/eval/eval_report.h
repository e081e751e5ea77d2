// The report of `inflight eval`: a table for the terminal and a JSON result
// (bench/results.schema.json, mode "eval").
#pragma once

#include <string>

#include <nlohmann/json_fwd.hpp>

#include "eval/accuracy_eval.h"

namespace inflight::eval {

// One row per configuration, the reference first:
//   mode          perplexity  vs base  mean KL    max KL    top-1
//   base (f32)       16.3131        -  0          0         100.00%
//   fp8-channel      16.3780   +0.40%  0.00213    0.0871     97.85%
std::string format_table(const EvalResult& result);

// The figures as JSON: what ran (model, backend, text, windows) and per configuration
// perplexity, mean NLL, mean / max KL, top-1 agreement, tokens and seconds. The caller adds the
// run's date, device, commit and command (bench/run_info.h).
nlohmann::json to_json(const EvalResult& result);

}  // namespace inflight::eval

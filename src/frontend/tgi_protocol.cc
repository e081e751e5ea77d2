#include "frontend/tgi_protocol.h"

#include <algorithm>
#include <limits>

#include "frontend/api_error.h"
#include "frontend/error_mapping.h"
#include "frontend/json_fields.h"
#include "frontend/openai_responses.h"
#include "frontend/request_fields.h"
#include "tokenizer/tokenizer.h"

namespace inflight::frontend {

using json = nlohmann::ordered_json;

TgiRequest parse_tgi_request(const json& body, const ProtocolLimits& limits) {
  check_fields(body, RequestApi::kTgi, limits);
  TgiRequest req;
  FieldReader top(body);
  std::optional<std::string> inputs = top.string("inputs");
  if (!inputs || inputs->empty())
    throw_bad_request("'inputs' must be a non-empty string", "inputs");
  req.inputs = std::move(*inputs);

  static const json kEmpty = json::object();
  const json* params = top.get("parameters");
  if (params != nullptr && !params->is_object()) {
    throw_bad_request("'parameters' must be an object", "parameters");
  }
  FieldReader r(params ? *params : kEmpty);
  constexpr double kMax = std::numeric_limits<float>::max();
  SamplingParams& s = req.sampling;
  auto temperature = r.positive_number("temperature", 0, kMax);
  auto top_k = r.integer("top_k", 1, std::numeric_limits<int32_t>::max());
  auto top_p = r.positive_number("top_p", 0, 1);
  if (top_p && *top_p >= 1) throw_bad_request("'top_p' must be in (0, 1)", "top_p");
  auto typical_p = r.positive_number("typical_p", 0, 1);
  if (typical_p && *typical_p < 1) throw_bad_request("'typical_p' is not supported", "typical_p");
  // TGI samples when asked to, or when any sampling knob is set; otherwise it is greedy.
  bool sample = r.boolean("do_sample").value_or(false) || temperature || top_k || top_p;
  s.temperature = sample ? static_cast<float>(temperature.value_or(1.0)) : 0.0f;
  s.top_k = static_cast<int32_t>(top_k.value_or(0));
  s.top_p = static_cast<float>(top_p.value_or(1.0));
  s.repetition_penalty =
      static_cast<float>(r.positive_number("repetition_penalty", 0, kMax).value_or(1.0));
  s.frequency_penalty = static_cast<float>(r.number("frequency_penalty", -2, 2).value_or(0.0));
  if (auto seed = r.integer("seed", 0, std::numeric_limits<int64_t>::max())) {
    s.seed = static_cast<uint64_t>(*seed);
  }
  s.max_tokens = static_cast<int32_t>(
      r.integer("max_new_tokens", 1, std::numeric_limits<int32_t>::max()).value_or(100));
  s.stop = r.string_or_list("stop", static_cast<size_t>(limits.max_stop));
  req.best_of = static_cast<int32_t>(r.integer("best_of", 1, limits.max_n).value_or(1));
  if (req.best_of > 1) {
    // TGI's rules: several sequences only make sense sampled, and each draws its own seed.
    if (!sample) throw_bad_request("'best_of' > 1 needs sampling ('do_sample': true)", "best_of");
    if (s.seed) throw_bad_request("'seed' must not be set when 'best_of' > 1", "seed");
    s.n = req.best_of;
  }
  if (auto truncate = r.integer("truncate", 1, std::numeric_limits<int32_t>::max())) {
    req.truncate = static_cast<int32_t>(*truncate);
  }
  if (r.boolean("watermark").value_or(false)) {
    throw_bad_request("'watermark' is not supported", "watermark");
  }
  if (const json* adapter = r.get("adapter_id"); adapter != nullptr && !adapter->is_null()) {
    throw_bad_request("'adapter_id' is not supported: this server serves one model, without LoRA "
                      "adapters",
                      "adapter_id");
  }
  req.constraint = parse_tgi_constraint(params ? *params : kEmpty);
  if (req.constraint) s.structured_output = req.constraint->constraint;
  req.details = r.boolean("details").value_or(false);
  req.decoder_input_details = r.boolean("decoder_input_details").value_or(false);
  if (req.decoder_input_details) s.prompt_logprobs = 0;
  req.return_full_text = r.boolean("return_full_text").value_or(false);
  req.top_n_tokens =
      static_cast<int32_t>(r.integer("top_n_tokens", 0, limits.max_logprobs).value_or(0));
  s.logprobs = req.top_n_tokens;
  return req;
}

namespace {

double finite(float lp) {
  return std::max(static_cast<double>(lp), -9999.0);
}

// TGI's names for why generation ended.
const char* tgi_finish_reason(const std::optional<FinishReason>& reason,
                              const std::string& stop_string,
                              const std::optional<int32_t>& stop_token) {
  if (reason == FinishReason::kLength) return "length";
  if (reason == FinishReason::kStop && stop_string.empty()) return "eos_token";
  if (reason == FinishReason::kStop) return "stop_sequence";
  return "length";  // aborted: TGI has no name for it
}

json token_json(const Tokenizer& tok, int32_t id, float logprob, std::string text) {
  return {{"id", id},
          {"text", std::move(text)},
          {"logprob", finite(logprob)},
          {"special", tok.is_special(id)}};
}

json top_tokens_json(const Tokenizer& tok, const TokenLogprob& lp, int32_t n) {
  json top = json::array();
  for (size_t i = 0; i < lp.top.size() && static_cast<int32_t>(i) < n; ++i) {
    int32_t id = lp.top[i].first;
    top.push_back(token_json(tok, id, lp.top[i].second, tok.token_piece(id, false)));
  }
  return top;
}

json seed_json(const SamplingParams& s) {
  if (s.temperature == 0.0f || !s.seed) return nullptr;
  return *s.seed;
}

// details.prefill: the prompt's tokens, the first without a logprob (null), as TGI sends them;
// empty unless decoder_input_details.
json prefill_json(const TgiFormat& format, const std::vector<TokenLogprob>& prompt) {
  json prefill = json::array();
  if (!format.request.decoder_input_details || format.prompt_tokens.empty()) return prefill;
  const Tokenizer& tok = *format.tokenizer;
  const int32_t first = format.prompt_tokens.front();
  prefill.push_back({{"id", first}, {"text", tok.token_piece(first, false)}, {"logprob", nullptr}});
  for (const TokenLogprob& lp : prompt) {
    prefill.push_back({{"id", lp.token_id},
                       {"text", tok.token_piece(lp.token_id, false)},
                       {"logprob", finite(lp.logprob)}});
  }
  return prefill;
}

class TgiStream final : public StreamFormatter {
 public:
  explicit TgiStream(TgiFormat format) : format_(std::move(format)) {}

  void on_output(const TaggedOutput& tagged, std::vector<std::string>& events) override {
    const RequestOutput& o = tagged.output;
    const Tokenizer& tok = *format_.tokenizer;
    if (o.finish_reason == FinishReason::kError) {
      // TGI's error event, with the message of the 500 a whole response answers.
      events.push_back(dump_json(
          {{"error", engine_failure_error(o.error).what()}, {"error_type", "generation"}}));
      return;
    }
    text_ += o.text;
    for (size_t i = 0; i < o.token_ids.size(); ++i) {
      int32_t id = o.token_ids[i];
      bool last = i + 1 == o.token_ids.size();
      float logprob = i < o.logprobs.size() ? o.logprobs[i].logprob : 0.0f;
      // The step's text rides on its last token, so the texts concatenate to the output.
      json event = {{"index", ++count_},
                    {"token", token_json(tok, id, logprob, last ? o.text : std::string())},
                    {"top_tokens", nullptr},
                    {"generated_text", nullptr},
                    {"details", nullptr}};
      if (format_.request.top_n_tokens > 0 && i < o.logprobs.size()) {
        event["top_tokens"] = top_tokens_json(tok, o.logprobs[i], format_.request.top_n_tokens);
      }
      if (count_ == 1 && format_.request.decoder_input_details) {
        event["prefill"] = prefill_json(format_, o.prompt_logprobs);
      }
      if (last && o.finish_reason) finish(event, o);
      events.push_back(dump_json(event));
    }
    if (o.token_ids.empty() && o.finish_reason) {
      // Finished without a token of its own (e.g. a stop string cut the held-back text).
      json event = {{"index", ++count_},
                    {"token", token_json(tok, 0, 0.0f, o.text)},
                    {"top_tokens", nullptr},
                    {"generated_text", nullptr},
                    {"details", nullptr}};
      event["token"]["special"] = true;
      finish(event, o);
      events.push_back(dump_json(event));
    }
  }

  void on_end(std::vector<std::string>&) override {}

 private:
  void finish(json& event, const RequestOutput& o) {
    std::string text = format_.request.return_full_text ? format_.request.inputs + text_ : text_;
    event["generated_text"] = std::move(text);
    event["details"] = {
        {"finish_reason", tgi_finish_reason(o.finish_reason, o.stop_string, o.stop_token_id)},
        {"generated_tokens", o.request_finished ? o.usage.completion_tokens : count_},
        {"seed", seed_json(format_.request.sampling)},
        {"input_length", format_.input_length}};
  }

  TgiFormat format_;
  std::string text_;
  int64_t count_ = 0;
};

}  // namespace

namespace {

double total_logprob(const ChoiceResult& c) {
  double sum = 0.0;
  for (const TokenLogprob& lp : c.logprobs) sum += lp.logprob;
  return sum;
}

// One sequence's details: its text, why it ended and its tokens (`prompt`: the prompt's logprobs,
// which ride on the first sequence).
json sequence_details(const TgiFormat& format, const ChoiceResult& c,
                      const std::vector<TokenLogprob>& prompt) {
  const Tokenizer& tok = *format.tokenizer;
  json tokens = json::array(), top_tokens = json::array();
  for (size_t i = 0; i < c.token_ids.size(); ++i) {
    int32_t id = c.token_ids[i];
    float logprob = i < c.logprobs.size() ? c.logprobs[i].logprob : 0.0f;
    tokens.push_back(token_json(tok, id, logprob, tok.token_piece(id, false)));
    if (format.request.top_n_tokens > 0 && i < c.logprobs.size()) {
      top_tokens.push_back(top_tokens_json(tok, c.logprobs[i], format.request.top_n_tokens));
    }
  }
  return {{"finish_reason", tgi_finish_reason(c.finish_reason, c.stop_string, c.stop_token_id)},
          {"generated_tokens", c.token_ids.size()},
          {"seed", seed_json(format.request.sampling)},
          {"prefill", prefill_json(format, prompt)},
          {"tokens", std::move(tokens)},
          {"top_tokens", std::move(top_tokens)}};
}

}  // namespace

json tgi_response(const TgiFormat& format, GenerationResult& result) {
  // best_of: the sequence of highest total logprob answers (the first on a tie).
  size_t best = 0;
  for (size_t i = 1; i < result.choices.size(); ++i) {
    if (total_logprob(result.choices[i]) > total_logprob(result.choices[best])) best = i;
  }
  auto full_text = [&](const ChoiceResult& c) {
    return format.request.return_full_text ? format.request.inputs + c.text : c.text;
  };
  json body = {{"generated_text", full_text(result.choices.at(best))}};
  if (format.request.details) {
    body["details"] =
        sequence_details(format, result.choices[best], result.choices[0].prompt_logprobs);
    if (result.choices.size() > 1) {
      json others = json::array();
      for (size_t i = 0; i < result.choices.size(); ++i) {
        if (i == best) continue;
        json seq = sequence_details(format, result.choices[i], result.choices[0].prompt_logprobs);
        seq.erase("top_tokens");
        json entry = {{"generated_text", full_text(result.choices[i])}};
        entry.update(seq);
        others.push_back(std::move(entry));
      }
      body["details"]["best_of_sequences"] = std::move(others);
    }
  }
  return body;
}

std::unique_ptr<StreamFormatter> tgi_stream_formatter(TgiFormat format) {
  return std::make_unique<TgiStream>(std::move(format));
}

}  // namespace inflight::frontend

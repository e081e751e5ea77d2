#include "bench/datasets.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include <nlohmann/json.hpp>

#include "bench/token_codec.h"
#include "core/check.h"

namespace inflight::bench {
namespace {

// Re-tokenizing random text rarely lands on the target in one go; a few rounds always did in
// practice. If not, the prompt keeps the length it has and reports it truthfully.
constexpr int kMaxRetokenizeRounds = 10;

constexpr int32_t kMinSequenceLen = 4;
constexpr int32_t kMaxPromptLen = 1024;
constexpr int32_t kMaxTotalLen = 2048;
constexpr double kDefaultOutputMedian = 128.0;
constexpr double kDefaultOutputSigma = 0.75;
constexpr int32_t kDefaultOutputMax = 1024;

class OrdinaryIds {
 public:
  explicit OrdinaryIds(const TokenCodec& codec) {
    for (int32_t id = 0; id < codec.vocab_size(); ++id) {
      if (codec.is_ordinary(id)) ids_.push_back(id);
    }
    INFLIGHT_CHECK_CODE(!ids_.empty(), ErrorCode::kInvalidArgument,
                        "tokenizer {} has no ordinary tokens", codec.description());
  }
  void append(std::vector<int32_t>& out, int32_t n, std::mt19937_64& rng) const {
    std::uniform_int_distribution<size_t> pick(0, ids_.size() - 1);
    for (int32_t i = 0; i < n; ++i) out.push_back(ids_[pick(rng)]);
  }

 private:
  std::vector<int32_t> ids_;
};

std::pair<int32_t, int32_t> length_range(int32_t len, double ratio) {
  return {static_cast<int32_t>(std::floor(len * (1.0 - ratio))),
          static_cast<int32_t>(std::ceil(len * (1.0 + ratio)))};
}

// Text whose encoding is `target` tokens long (or as near as kMaxRetokenizeRounds allow).
BenchRequest text_of_length(std::vector<int32_t> ids, int32_t target, const TokenCodec& codec,
                            const OrdinaryIds& ordinary, std::mt19937_64& rng) {
  BenchRequest r;
  for (int round = 0;; ++round) {
    r.prompt = codec.decode(ids);
    ids = codec.encode(r.prompt);
    const auto n = static_cast<int32_t>(ids.size());
    if (n == target || round == kMaxRetokenizeRounds) break;
    if (n > target) {
      ids.resize(target);
    } else {
      ordinary.append(ids, target - n, rng);
    }
  }
  r.prompt_len = static_cast<int32_t>(ids.size());
  return r;
}

std::string human_text(const nlohmann::json& turn) {
  const auto v = turn.find("value");
  return (v != turn.end() && v->is_string()) ? v->get<std::string>() : std::string();
}

}  // namespace

std::vector<BenchRequest> random_dataset(const RandomDatasetOptions& o, const TokenCodec& codec) {
  INFLIGHT_CHECK_CODE(o.range_ratio >= 0.0 && o.range_ratio < 1.0, ErrorCode::kInvalidArgument,
                      "--random-range-ratio must be in [0, 1), got {}", o.range_ratio);
  INFLIGHT_CHECK_CODE(o.input_len >= 1 && o.output_len >= 1 && o.prefix_len >= 0,
                      ErrorCode::kInvalidArgument,
                      "random lengths must be >= 1 (prefix >= 0): input {}, output {}, prefix {}",
                      o.input_len, o.output_len, o.prefix_len);
  const OrdinaryIds ordinary(codec);
  std::mt19937_64 rng(o.seed);
  std::vector<int32_t> prefix;
  ordinary.append(prefix, o.prefix_len, rng);
  const auto [in_lo, in_hi] = length_range(o.input_len, o.range_ratio);
  const auto [out_lo, out_hi] = length_range(o.output_len, o.range_ratio);
  std::uniform_int_distribution<int32_t> input_len(std::max(in_lo, 1), in_hi);
  std::uniform_int_distribution<int32_t> output_len(std::max(out_lo, 1), out_hi);
  std::vector<BenchRequest> out;
  out.reserve(o.num_prompts);
  for (int32_t i = 0; i < o.num_prompts; ++i) {
    const int32_t in = input_len(rng);
    const int32_t target = o.prefix_len + in;
    std::vector<int32_t> ids = prefix;
    ordinary.append(ids, in, rng);
    BenchRequest r = text_of_length(std::move(ids), target, codec, ordinary, rng);
    r.output_len = output_len(rng);
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<Conversation> parse_sharegpt(std::string_view json_text) {
  const auto doc = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  INFLIGHT_CHECK_CODE(doc.is_array(), ErrorCode::kInvalidFile,
                      "a prompts file must hold a JSON array of conversations");
  std::vector<Conversation> out;
  for (const auto& item : doc) {
    const auto turns = item.is_object() ? item.find("conversations") : item.end();
    if (!item.is_object() || turns == item.end() || !turns->is_array()) continue;
    for (size_t i = 0; i < turns->size(); ++i) {
      const auto& turn = (*turns)[i];
      if (!turn.is_object() || turn.value("from", "") != "human") continue;
      Conversation c{human_text(turn), std::nullopt};
      if (i + 1 < turns->size() && (*turns)[i + 1].is_object() &&
          (*turns)[i + 1].value("from", "") != "human") {
        c.reply = human_text((*turns)[i + 1]);
      }
      if (!c.prompt.empty()) out.push_back(std::move(c));
      break;
    }
  }
  return out;
}

std::vector<BenchRequest> prompts_dataset(const std::vector<Conversation>& conversations,
                                          const PromptsDatasetOptions& o, const TokenCodec& codec) {
  INFLIGHT_CHECK_CODE(!o.fixed_output_len || *o.fixed_output_len >= 1, ErrorCode::kInvalidArgument,
                      "a fixed output length must be >= 1");
  std::mt19937_64 rng(o.seed);
  std::vector<size_t> order(conversations.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::shuffle(order.begin(), order.end(), rng);
  std::lognormal_distribution<double> default_len(std::log(kDefaultOutputMedian),
                                                  kDefaultOutputSigma);
  std::vector<BenchRequest> valid;
  for (size_t index : order) {
    if (static_cast<int32_t>(valid.size()) == o.num_prompts) break;
    const Conversation& c = conversations[index];
    BenchRequest r;
    r.prompt = c.prompt;
    r.prompt_len = static_cast<int32_t>(codec.encode(c.prompt).size());
    if (o.fixed_output_len) {
      r.output_len = *o.fixed_output_len;
    } else if (c.reply) {
      r.output_len = static_cast<int32_t>(codec.encode(*c.reply).size());
    } else {
      const double drawn = std::round(default_len(rng));
      r.output_len = static_cast<int32_t>(
          std::clamp(drawn, double{kMinSequenceLen}, double{kDefaultOutputMax}));
    }
    const bool too_short =
        r.prompt_len < kMinSequenceLen || (!o.fixed_output_len && r.output_len < kMinSequenceLen);
    const bool too_long =
        r.prompt_len > kMaxPromptLen || r.prompt_len + r.output_len > kMaxTotalLen;
    if (!too_short && !too_long) valid.push_back(std::move(r));
  }
  INFLIGHT_CHECK_CODE(!valid.empty() || o.num_prompts == 0, ErrorCode::kInvalidArgument,
                      "no conversation in the prompts file fits the length limits");
  std::vector<BenchRequest> out;
  out.reserve(o.num_prompts);
  for (int32_t i = 0; i < o.num_prompts; ++i) out.push_back(valid[i % valid.size()]);
  return out;
}

}  // namespace inflight::bench

// Typed, validated reads of a JSON request body. Every failure is an ApiError(400) that names
// the field, so a client learns exactly what to fix:
//
//   FieldReader r(body);                                  // body must be an object
//   float t = r.number("temperature", 0, 2).value_or(1);  // int or float; null = absent
//   auto n = r.integer("n", 1, 128);
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace inflight::frontend {

// Parses a request body; 400 "malformed JSON" or "must be a JSON object" otherwise.
nlohmann::ordered_json parse_json_object(std::string_view body);

class FieldReader {
 public:
  explicit FieldReader(const nlohmann::ordered_json& object) : object_(object) {}

  // The field, or nullptr when absent or null.
  const nlohmann::ordered_json* get(std::string_view name) const;

  std::optional<double> number(std::string_view name, double lo, double hi) const;
  // Like number() but the interval is open at lo: (lo, hi].
  std::optional<double> positive_number(std::string_view name, double lo, double hi) const;
  std::optional<int64_t> integer(std::string_view name, int64_t lo, int64_t hi) const;
  std::optional<bool> boolean(std::string_view name) const;
  std::optional<std::string> string(std::string_view name) const;
  // A string or a list of strings (OpenAI's `stop`); each non-empty.
  std::vector<std::string> string_or_list(std::string_view name, size_t max_items) const;
  std::vector<int32_t> int_list(std::string_view name, int64_t lo, int64_t hi) const;
  // OpenAI's logit_bias: an object from token ids (decimal strings in [0, max_id]) to numbers in
  // [-100, 100].
  std::vector<std::pair<int32_t, float>> token_bias_map(std::string_view name,
                                                        int64_t max_id) const;

 private:
  const nlohmann::ordered_json& object_;
};

// "number", "string", ... for error messages.
const char* json_type_name(const nlohmann::ordered_json& value);

}  // namespace inflight::frontend

// JsonKey: a value of a JSON file with the file and dotted path it came from, so that each
// error names them ("config.json: quantization_config.weights.num_bits must be an integer,
// found \"8\""). Typed reads throw Error(kInvalidFile) on a wrong JSON type; absent keys and
// null read alike. Holds a pointer into the document: the document must outlive it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/check.h"

namespace inflight {

class JsonKey {
 public:
  using json = nlohmann::json;

  JsonKey(const json* value, std::string file, std::string path)
      : value_(value), file_(std::move(file)), path_(std::move(path)) {}

  // Absent keys and JSON null read alike.
  bool absent() const { return value_ == nullptr || value_->is_null(); }
  const json& value() const { return *value_; }
  std::string where() const { return fmt::format("{}: {}", file_, path_); }
  std::string shown() const { return absent() ? "null" : value_->dump(); }

  JsonKey at(std::string_view key) const {
    const json* child = nullptr;
    if (!absent() && value_->is_object()) {
      const auto it = value_->find(key);
      if (it != value_->end()) child = &*it;
    }
    return {child, file_, path_.empty() ? std::string(key) : fmt::format("{}.{}", path_, key)};
  }
  JsonKey index(size_t i) const { return {&value_->at(i), file_, fmt::format("{}[{}]", path_, i)}; }
  const JsonKey& require() const {
    INFLIGHT_CHECK_CODE(!absent(), ErrorCode::kInvalidFile, "{} is missing", where());
    return *this;
  }
  const JsonKey& object() const {
    INFLIGHT_CHECK_CODE(!absent() && value_->is_object(), ErrorCode::kInvalidFile,
                        "{} must be an object, found {}", where(), shown());
    return *this;
  }
  std::string str() const {
    INFLIGHT_CHECK_CODE(!absent() && value_->is_string(), ErrorCode::kInvalidFile,
                        "{} must be a string, found {}", where(), shown());
    return value_->get<std::string>();
  }
  std::optional<std::string> str_or_null() const {
    if (absent()) return std::nullopt;
    return str();
  }
  int64_t integer() const {
    INFLIGHT_CHECK_CODE(!absent() && value_->is_number_integer(), ErrorCode::kInvalidFile,
                        "{} must be an integer, found {}", where(), shown());
    return value_->get<int64_t>();
  }
  double number() const {
    INFLIGHT_CHECK_CODE(!absent() && value_->is_number(), ErrorCode::kInvalidFile,
                        "{} must be a number, found {}", where(), shown());
    return value_->get<double>();
  }
  bool boolean() const {
    INFLIGHT_CHECK_CODE(!absent() && value_->is_boolean(), ErrorCode::kInvalidFile,
                        "{} must be true or false, found {}", where(), shown());
    return value_->get<bool>();
  }
  // A list of strings; absent or null is empty.
  std::vector<std::string> strings() const {
    std::vector<std::string> out;
    if (absent()) return out;
    INFLIGHT_CHECK_CODE(value_->is_array(), ErrorCode::kInvalidFile,
                        "{} must be a list of strings, found {}", where(), shown());
    for (size_t i = 0; i < value_->size(); ++i) {
      out.push_back(index(i).str());
    }
    return out;
  }

 private:
  const json* value_;
  std::string file_;
  std::string path_;
};

}  // namespace inflight

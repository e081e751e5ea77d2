#include "frontend/json_fields.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>

#include "frontend/api_error.h"

namespace inflight::frontend {

using json = nlohmann::ordered_json;

json parse_json_object(std::string_view body) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw_bad_request("malformed JSON in request body");
  if (!j.is_object()) throw_bad_request("request body must be a JSON object");
  return j;
}

const char* json_type_name(const json& value) {
  switch (value.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "integer";
    case json::value_t::number_float: return "number";
    case json::value_t::string: return "string";
    case json::value_t::array: return "array";
    case json::value_t::object: return "object";
    default: return "value";
  }
}

const json* FieldReader::get(std::string_view name) const {
  auto it = object_.find(name);
  if (it == object_.end() || it->is_null()) return nullptr;
  return &*it;
}

namespace {

std::string field(std::string_view name) { return std::string(name); }

[[noreturn]] void wrong_type(std::string_view name, const char* expected, const json& value) {
  throw_bad_request(fmt::format("'{}' must be {}, got {}", name, expected, json_type_name(value)),
                    field(name));
}

}  // namespace

std::optional<double> FieldReader::number(std::string_view name, double lo, double hi) const {
  const json* v = get(name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) wrong_type(name, "a number", *v);
  double x = v->get<double>();
  if (!std::isfinite(x) || x < lo || x > hi) {
    throw_bad_request(fmt::format("'{}' must be in [{}, {}], got {}", name, lo, hi, x),
                      field(name));
  }
  return x;
}

std::optional<double> FieldReader::positive_number(std::string_view name, double lo,
                                                   double hi) const {
  const json* v = get(name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) wrong_type(name, "a number", *v);
  double x = v->get<double>();
  if (!std::isfinite(x) || x <= lo || x > hi) {
    throw_bad_request(fmt::format("'{}' must be in ({}, {}], got {}", name, lo, hi, x),
                      field(name));
  }
  return x;
}

std::optional<int64_t> FieldReader::integer(std::string_view name, int64_t lo, int64_t hi) const {
  const json* v = get(name);
  if (v == nullptr) return std::nullopt;
  int64_t x = 0;
  if (v->is_number_unsigned()) {
    uint64_t u = v->get<uint64_t>();
    if (u > static_cast<uint64_t>(hi)) {
      throw_bad_request(fmt::format("'{}' must be in [{}, {}], got {}", name, lo, hi, u),
                        field(name));
    }
    x = static_cast<int64_t>(u);
  } else if (v->is_number_integer()) {
    x = v->get<int64_t>();
  } else if (v->is_number_float() && std::floor(v->get<double>()) == v->get<double>() &&
             std::fabs(v->get<double>()) < 9e15) {
    x = static_cast<int64_t>(v->get<double>());  // 2.0 is an integer in JSON's eyes
  } else {
    wrong_type(name, "an integer", *v);
  }
  if (x < lo || x > hi) {
    throw_bad_request(fmt::format("'{}' must be in [{}, {}], got {}", name, lo, hi, x),
                      field(name));
  }
  return x;
}

std::optional<bool> FieldReader::boolean(std::string_view name) const {
  const json* v = get(name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean()) wrong_type(name, "a boolean", *v);
  return v->get<bool>();
}

std::optional<std::string> FieldReader::string(std::string_view name) const {
  const json* v = get(name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_string()) wrong_type(name, "a string", *v);
  return v->get<std::string>();
}

std::vector<std::string> FieldReader::string_or_list(std::string_view name,
                                                     size_t max_items) const {
  const json* v = get(name);
  std::vector<std::string> out;
  if (v == nullptr) return out;
  if (v->is_string()) {
    out.push_back(v->get<std::string>());
  } else if (v->is_array()) {
    for (const auto& item : *v) {
      if (!item.is_string()) wrong_type(name, "a string or a list of strings", *v);
      out.push_back(item.get<std::string>());
    }
  } else {
    wrong_type(name, "a string or a list of strings", *v);
  }
  if (out.size() > max_items) {
    throw_bad_request(fmt::format("'{}' may hold at most {} items", name, max_items), field(name));
  }
  for (const auto& s : out) {
    if (s.empty()) throw_bad_request(fmt::format("'{}' must not contain empty strings", name),
                                     field(name));
  }
  return out;
}

std::vector<int32_t> FieldReader::int_list(std::string_view name, int64_t lo, int64_t hi) const {
  const json* v = get(name);
  std::vector<int32_t> out;
  if (v == nullptr) return out;
  if (!v->is_array()) wrong_type(name, "a list of integers", *v);
  for (const auto& item : *v) {
    if (!item.is_number_integer()) wrong_type(name, "a list of integers", *v);
    int64_t x = item.get<int64_t>();
    if (x < lo || x > hi) {
      throw_bad_request(fmt::format("'{}' items must be in [{}, {}], got {}", name, lo, hi, x),
                        field(name));
    }
    out.push_back(static_cast<int32_t>(x));
  }
  return out;
}

std::vector<std::pair<int32_t, float>> FieldReader::token_bias_map(std::string_view name,
                                                                   int64_t max_id) const {
  const json* v = get(name);
  std::vector<std::pair<int32_t, float>> out;
  if (v == nullptr) return out;
  if (!v->is_object()) wrong_type(name, "an object from token ids to numbers", *v);
  for (const auto& [key, value] : v->items()) {
    int64_t id = -1;
    const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
    if (ec != std::errc() || end != key.data() + key.size() || id < 0 || id > max_id) {
      throw_bad_request(fmt::format("'{}' keys must be token ids in [0, {}], got \"{}\"", name,
                                    max_id, key),
                        field(name));
    }
    if (!value.is_number() || !(value.get<double>() >= -100.0 && value.get<double>() <= 100.0)) {
      throw_bad_request(fmt::format("'{}' values must be numbers in [-100, 100], got {} for token {}",
                                    name, value.dump(), key),
                        field(name));
    }
    out.emplace_back(static_cast<int32_t>(id), static_cast<float>(value.get<double>()));
  }
  return out;
}

}  // namespace inflight::frontend

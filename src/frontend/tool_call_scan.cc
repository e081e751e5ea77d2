// Text and JSON scanning shared by the tool-call formats (tool_call_formats.h).
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "frontend/tool_call_formats.h"

namespace inflight::frontend::tool_call_formats {

using json = nlohmann::ordered_json;

namespace {

constexpr std::string_view kSpace = " \t\r\n";

bool scalar_char(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '.' ||
         c == '+' || c == '-';
}

}  // namespace

std::string_view trim(std::string_view s) {
  const size_t b = s.find_first_not_of(kSpace);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(kSpace) - b + 1);
}

size_t skip_space(std::string_view text, size_t i) {
  const size_t b = text.find_first_not_of(kSpace, i);
  return b == std::string_view::npos ? text.size() : b;
}

size_t partial_marker(std::string_view text, std::string_view marker) {
  for (size_t k = std::min(text.size(), marker.size() - 1); k > 0; --k) {
    if (text.ends_with(marker.substr(0, k))) return k;
  }
  return 0;
}

bool may_become(std::string_view text, std::string_view marker) {
  return text.size() < marker.size() && marker.starts_with(text);
}

void add_content(ParsedOutput& out, std::string_view segment) {
  if (out.calls.empty() || !trim(segment).empty()) out.content += segment;
}

void add_trailing(ParsedOutput& out, std::string_view rest, std::string_view marker, bool at_end) {
  add_content(out, rest.substr(0, rest.size() - (at_end ? 0 : partial_marker(rest, marker))));
}

ParsedOutput all_content(std::string_view text) {
  return ParsedOutput{std::string(text), {}};
}

const json* tool_properties(const json& tools, std::string_view name) {
  if (!tools.is_array()) return nullptr;
  for (const json& tool : tools) {
    const auto f = tool.find("function");
    if (f == tool.end() || !f->is_object() || f->value("name", "") != name) continue;
    const auto params = f->find("parameters");
    if (params == f->end() || !params->is_object()) return nullptr;
    const auto props = params->find("properties");
    return props != params->end() && props->is_object() ? &*props : nullptr;
  }
  return nullptr;
}

std::string schema_type(const json* properties, const std::string& param) {
  if (!properties) return {};
  const auto p = properties->find(param);
  if (p == properties->end() || !p->is_object()) return {};
  const auto t = p->find("type");
  if (t == p->end()) return {};
  if (t->is_string()) return t->get<std::string>();
  if (t->is_array()) {
    for (const json& each : *t) {
      if (each.is_string() && each != "null") return each.get<std::string>();
    }
  }
  return {};
}

json param_value(const std::string& text, const std::string& type) {
  if (type.empty() || type == "string") return text;
  if (text == "null") return nullptr;
  if (type == "integer") {
    char* end = nullptr;
    const long long v = std::strtoll(text.c_str(), &end, 10);
    return !text.empty() && *end == '\0' ? json(v) : json(text);
  }
  if (type == "boolean") {
    if (text == "true" || text == "True") return true;
    if (text == "false" || text == "False") return false;
    return text;
  }
  const json parsed = json::parse(text, nullptr, false);
  if (parsed.is_discarded()) return text;
  if (type == "number" && !parsed.is_number()) return text;
  return parsed;
}

std::string json_text(const nlohmann::ordered_json& value) {
  return value.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

JsonValueEnd json_value_end(std::string_view text, size_t i) {
  if (i >= text.size()) return {Scan::kOpen, 0};
  const char first = text[i];
  if (first == '"' || first == '{' || first == '[') {
    int depth = 0;
    bool in_string = false, escaped = false;
    for (size_t j = i; j < text.size(); ++j) {
      const char c = text[j];
      if (in_string) {
        if (escaped) {
          escaped = false;
        } else if (c == '\\') {
          escaped = true;
        } else if (c == '"') {
          in_string = false;
          if (depth == 0) return {Scan::kDone, j + 1};
        }
      } else if (c == '"') {
        in_string = true;
      } else if (c == '{' || c == '[') {
        ++depth;
      } else if ((c == '}' || c == ']') && --depth == 0) {
        return {Scan::kDone, j + 1};
      }
    }
    return {Scan::kOpen, 0};
  }
  size_t j = i;
  while (j < text.size() && scalar_char(text[j])) ++j;
  if (j == i) return {Scan::kBad, 0};
  return j == text.size() ? JsonValueEnd{Scan::kOpen, 0} : JsonValueEnd{Scan::kDone, j};
}

JsonCall read_json_call(std::string_view text) {
  if (text.empty() || text.front() != '{') return {};
  std::optional<std::string> name;
  size_t args_begin = 0;
  std::optional<JsonValueEnd> args;  // set once an arguments key is read
  // What is known while the object is still open.
  const auto open = [&]() -> JsonCall {
    if (!name || !args || text[args_begin] != '{') return {Scan::kOpen, std::nullopt, 0};
    const size_t end = args->scan == Scan::kDone ? args->end : text.size();
    return {Scan::kOpen, ToolCall{*name, std::string(text.substr(args_begin, end - args_begin))},
            0};
  };
  size_t i = skip_space(text, 1);
  while (true) {
    if (i >= text.size()) return open();
    if (text[i] == '}') break;
    if (text[i] != '"') return {};
    const JsonValueEnd key_end = json_value_end(text, i);
    if (key_end.scan != Scan::kDone) return open();
    const json key = json::parse(text.substr(i, key_end.end - i), nullptr, false);
    i = skip_space(text, key_end.end);
    if (i >= text.size()) return open();
    if (text[i] != ':' || !key.is_string()) return {};
    i = skip_space(text, i + 1);
    const JsonValueEnd value = json_value_end(text, i);
    if (value.scan == Scan::kBad) return {};
    const std::string& k = key.get_ref<const std::string&>();
    if (k == "name" && value.scan == Scan::kDone) {
      const json v = json::parse(text.substr(i, value.end - i), nullptr, false);
      if (!v.is_string()) return {};
      name = v.get<std::string>();
    } else if ((k == "arguments" || k == "parameters") && !args) {
      args_begin = i;
      args = value;
    }
    if (value.scan == Scan::kOpen) return open();
    i = skip_space(text, value.end);
    if (i >= text.size()) return open();
    if (text[i] == ',') {
      i = skip_space(text, i + 1);
    } else if (text[i] != '}') {
      return {};
    }
  }
  // Complete: a call when it is JSON, names a function and has an object (or its encoding).
  const size_t end = i + 1;
  if (!name || json::parse(text.substr(0, end), nullptr, false).is_discarded()) return {};
  ToolCall call{*name, "{}"};
  if (args) {
    const std::string_view value = text.substr(args_begin, args->end - args_begin);
    if (value.front() == '{') {
      call.arguments = value;
    } else if (value.front() == '"') {  // already encoded, as OpenAI sends it
      const json decoded = json::parse(value);
      if (!json::parse(decoded.get<std::string>(), nullptr, false).is_object()) return {};
      call.arguments = decoded.get<std::string>();
    } else {
      return {};
    }
  }
  return {Scan::kDone, std::move(call), end};
}

JsonCallList read_json_call_list(std::string_view text) {
  JsonCallList list;
  if (text.empty() || text.front() != '[') return list;
  size_t i = skip_space(text, 1);
  while (true) {
    if (i >= text.size()) {
      list.scan = Scan::kOpen;
      return list;
    }
    if (text[i] == ']') break;
    JsonCall call = read_json_call(text.substr(i));
    if (call.scan == Scan::kBad) return {};
    if (call.call) list.calls.push_back(std::move(*call.call));
    if (call.scan == Scan::kOpen) {
      list.scan = Scan::kOpen;
      return list;
    }
    i = skip_space(text, i + call.end);
    if (i < text.size() && text[i] == ',') {
      i = skip_space(text, i + 1);
    } else if (i < text.size() && text[i] != ']') {
      return {};
    }
  }
  list.scan = Scan::kDone;
  list.end = i + 1;
  return list;
}

}  // namespace inflight::frontend::tool_call_formats

// glm45: <tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value>...</tool_call> (tool_calls.h),
// with or without newlines between the parts (GLM-4.5/4.6 write them, GLM-4.7 does not). The
// templates write a string value as it is and any other value as JSON: a value whose schema
// type is "string" stays text, any other is read as JSON when it is JSON (a value of a parameter
// the schema does not type too), else kept as text.
#include <nlohmann/json.hpp>

#include "frontend/tool_call_formats.h"

namespace inflight::frontend::tool_call_formats {

using json = nlohmann::ordered_json;

namespace {

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";
constexpr std::string_view kKey = "<arg_key>";
constexpr std::string_view kKeyEnd = "</arg_key>";
constexpr std::string_view kValue = "<arg_value>";
constexpr std::string_view kValueEnd = "</arg_value>";

json glm_value(const std::string& text, const std::string& type) {
  if (type == "string") return text;
  if (!type.empty()) return param_value(text, type);
  const json parsed = json::parse(text, nullptr, false);
  return parsed.is_discarded() ? json(text) : parsed;
}

// Where a scan of one call's body stands.
enum class Body { kDone, kOpen, kBad };

// The call whose name starts at text[i] (after <tool_call>). On kDone `end` is one past its
// </tool_call> (or the text's end when the whole output was cut short); on kOpen the call so far
// was added once an <arg_key> follows its name (a name alone may still turn out to be text);
// kBad: not a call (nothing added).
Body read_call(std::string_view text, size_t i, const json& tools, bool at_end, ParsedOutput& out,
               size_t& end) {
  const size_t name_end = text.find_first_of("\n<", i);
  if (name_end == std::string_view::npos) return at_end ? Body::kBad : Body::kOpen;
  const std::string_view name = trim(text.substr(i, name_end - i));
  if (name.empty() || name.find_first_of(" \t{}\"") != std::string_view::npos) return Body::kBad;
  const json* properties = tool_properties(tools, name);
  ToolCall call{std::string(name), "{"};
  size_t num_args = 0;
  bool keyed = false;  // an <arg_key> came: this is a call
  Body state = Body::kDone;
  size_t j = name_end;
  while (true) {
    j = skip_space(text, j);
    const std::string_view rest = text.substr(j);
    if (rest.starts_with(kClose)) {
      j += kClose.size();
      break;
    }
    if (!rest.starts_with(kKey)) {
      if (at_end) {  // cut short, or text after the arguments: what came is the call
        if (!rest.empty()) return Body::kBad;
        break;
      }
      if (rest.empty() || may_become(rest, kKey) || may_become(rest, kClose)) {
        state = Body::kOpen;
        break;
      }
      return Body::kBad;
    }
    keyed = true;
    const size_t key_end = text.find(kKeyEnd, j + kKey.size());
    const size_t v = key_end == std::string_view::npos ? text.size()
                                                       : skip_space(text, key_end + kKeyEnd.size());
    const std::string_view after_key = text.substr(v);
    if (!after_key.starts_with(kValue)) {
      if (!after_key.empty() && !may_become(after_key, kValue)) return Body::kBad;
      if (!at_end) state = Body::kOpen;
      break;  // at the end: cut short within a key, what came is the call
    }
    size_t v_end = text.find(kValueEnd, v + kValue.size());
    size_t next = v_end + kValueEnd.size();
    if (v_end == std::string_view::npos) {
      if (!at_end) {
        state = Body::kOpen;
        break;
      }
      v_end = next = text.size();  // cut short within a value: the value so far
    }
    const std::string key(trim(text.substr(j + kKey.size(), key_end - j - kKey.size())));
    const std::string value(text.substr(v + kValue.size(), v_end - v - kValue.size()));
    call.arguments += num_args++ == 0 ? "" : ", ";
    call.arguments +=
        json_text(key) + ": " + json_text(glm_value(value, schema_type(properties, key)));
    j = next;
  }
  if (state == Body::kOpen && !keyed) return state;
  if (state == Body::kDone) call.arguments += "}";
  out.calls.push_back(std::move(call));
  end = state == Body::kDone ? j : text.size();
  return state;
}

}  // namespace

ParsedOutput parse_glm45(std::string_view text, const json& tools, bool at_end) {
  ParsedOutput out;
  size_t pos = 0;
  while (true) {
    const size_t open_tag = text.find(kOpen, pos);
    if (open_tag == std::string_view::npos) {
      add_trailing(out, text.substr(pos), kOpen, at_end);
      return out;
    }
    add_content(out, text.substr(pos, open_tag - pos));
    size_t end = 0;
    switch (read_call(text, open_tag + kOpen.size(), tools, at_end, out, end)) {
      case Body::kOpen:
        return out;
      case Body::kBad:  // not a call: the tag is text
        out.content += kOpen;
        pos = open_tag + kOpen.size();
        break;
      case Body::kDone:
        pos = end;
        break;
    }
  }
}

}  // namespace inflight::frontend::tool_call_formats

// The JSON tool-call formats: hermes, llama3_json, mistral and json_list (tool_calls.h).
#include <algorithm>

#include <nlohmann/json.hpp>

#include "frontend/tool_call_formats.h"

namespace inflight::frontend::tool_call_formats {

namespace {

constexpr std::string_view kHermesOpen = "<tool_call>";
constexpr std::string_view kHermesClose = "</tool_call>";
constexpr std::string_view kPythonTag = "<|python_tag|>";
constexpr std::string_view kMistralCalls = "[TOOL_CALLS]";
constexpr std::string_view kMistralArgs = "[ARGS]";
constexpr std::string_view kMistralCallId = "[CALL_ID]";

bool name_char(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
         c == '-' || c == '.';
}

}  // namespace

ParsedOutput parse_hermes(std::string_view text, bool at_end) {
  ParsedOutput out;
  size_t pos = 0;
  while (true) {
    const size_t open = text.find(kHermesOpen, pos);
    if (open == std::string_view::npos) {
      add_trailing(out, text.substr(pos), kHermesOpen, at_end);
      return out;
    }
    add_content(out, text.substr(pos, open - pos));
    const size_t body = skip_space(text, open + kHermesOpen.size());
    if (body == text.size() && !at_end) return out;  // the block's body has not begun
    JsonCall call = read_json_call(text.substr(body));
    if (call.scan == Scan::kOpen && !at_end) {
      if (call.call) out.calls.push_back(std::move(*call.call));
      return out;
    }
    if (call.scan != Scan::kDone) {  // not a call: the tag is text
      out.content += kHermesOpen;
      pos = open + kHermesOpen.size();
      continue;
    }
    out.calls.push_back(std::move(*call.call));
    const size_t after = body + call.end;
    const size_t close = text.find(kHermesClose, after);
    if (close != std::string_view::npos) {
      pos = close + kHermesClose.size();
    } else if (at_end) {
      pos = after;  // stopped by EOS or a stop string before the closing tag: still a call
    } else {
      return out;  // the closing tag is still to come
    }
  }
}

ParsedOutput parse_llama3_json(std::string_view text, bool at_end) {
  size_t i = skip_space(text, 0);
  const std::string_view head = text.substr(i);
  if (!at_end && (head.empty() || may_become(head, kPythonTag))) return {};
  if (head.starts_with(kPythonTag)) i = skip_space(text, i + kPythonTag.size());
  ParsedOutput out;
  while (i < text.size()) {
    JsonCall call = read_json_call(text.substr(i));
    if (call.scan == Scan::kBad || (call.scan == Scan::kOpen && at_end)) return all_content(text);
    if (call.call) out.calls.push_back(std::move(*call.call));
    if (call.scan == Scan::kOpen) return out;
    i = skip_space(text, i + call.end);
    if (i < text.size() && text[i] == ';') i = skip_space(text, i + 1);
  }
  if (out.calls.empty() && at_end) return all_content(text);
  return out;
}

ParsedOutput parse_json_list(std::string_view text, bool at_end) {
  const size_t i = skip_space(text, 0);
  if (i == text.size() && !at_end) return {};
  JsonCallList list = read_json_call_list(text.substr(i));
  const bool done = list.scan == Scan::kDone && skip_space(text, i + list.end) == text.size();
  if (list.scan == Scan::kBad || (at_end && (!done || list.calls.empty()))) {
    return all_content(text);
  }
  return ParsedOutput{{}, std::move(list.calls)};
}

ParsedOutput parse_mistral(std::string_view text, bool at_end) {
  ParsedOutput out;
  size_t marker = text.find(kMistralCalls);
  if (marker == std::string_view::npos) {
    add_trailing(out, text, kMistralCalls, at_end);
    return out;
  }
  out.content = text.substr(0, marker);
  // From the marker at `marker` on, the text is not calls: it is content.
  const auto not_calls = [&] {
    add_content(out, text.substr(marker));
    return out;
  };
  while (true) {
    size_t i = skip_space(text, marker + kMistralCalls.size());
    if (i == text.size()) return at_end ? not_calls() : out;
    if (text[i] == '[') {  // [TOOL_CALLS] [{"name": ..., "arguments": ...}, ...]
      JsonCallList list = read_json_call_list(text.substr(i));
      if (list.scan == Scan::kBad || (list.scan == Scan::kOpen && at_end)) return not_calls();
      if (list.scan == Scan::kDone && list.calls.empty()) return not_calls();  // [] calls nothing
      for (ToolCall& c : list.calls) out.calls.push_back(std::move(c));
      if (list.scan == Scan::kOpen) return out;
      i += list.end;
    } else {  // [TOOL_CALLS]name[CALL_ID]id[ARGS]{...}
      const size_t args_tag = text.find(kMistralArgs, i);
      if (args_tag == std::string_view::npos) {
        // The name is still coming while every character may belong to it or to a tag.
        const std::string_view rest = text.substr(i);
        const bool may_be_name =
            rest.size() < 256 && std::all_of(rest.begin(), rest.end(), [](char c) {
              return name_char(c) || c == '[' || c == ']';
            });
        return may_be_name && !at_end ? out : not_calls();
      }
      std::string_view name = text.substr(i, args_tag - i);
      name = trim(name.substr(0, name.find(kMistralCallId)));
      if (name.empty() || !std::all_of(name.begin(), name.end(), name_char)) return not_calls();
      const size_t a = skip_space(text, args_tag + kMistralArgs.size());
      const JsonValueEnd args = json_value_end(text, a);
      if (a < text.size() && text[a] != '{') return not_calls();
      if (args.scan != Scan::kDone) {
        if (at_end) return not_calls();
        out.calls.push_back(ToolCall{std::string(name), std::string(text.substr(a))});
        return out;
      }
      const std::string_view value = text.substr(a, args.end - a);
      if (!nlohmann::json::parse(value, nullptr, false).is_object()) return not_calls();
      out.calls.push_back(ToolCall{std::string(name), std::string(value)});
      i = args.end;
    }
    const size_t next = text.find(kMistralCalls, i);
    if (next == std::string_view::npos) {
      add_trailing(out, text.substr(i), kMistralCalls, at_end);
      return out;
    }
    add_content(out, text.substr(i, next - i));
    marker = next;
  }
}

}  // namespace inflight::frontend::tool_call_formats

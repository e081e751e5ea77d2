// Calls between special tokens, a JSON object of arguments each (tool_calls.h):
//
//   kimi_k2      <|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:0
//                <|tool_call_argument_begin|>{...}<|tool_call_end|>...<|tool_calls_section_end|>
//   deepseek_v31 <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{...}
//                <｜tool▁call▁end｜>...<｜tool▁calls▁end｜>
//   deepseek_v3  the same markers, each call function<｜tool▁sep｜>NAME\n```json\n{...}\n```
//                (DeepSeek V3, R1 and its distills)
//
// Text before the section is content, as is text after its end. Kimi's call ids
// ("functions.NAME:INDEX") give the name; the arguments are the object as the model wrote it.
#include <algorithm>

#include <nlohmann/json.hpp>

#include "frontend/tool_call_formats.h"

namespace inflight::frontend::tool_call_formats {

namespace {

struct Markers {
  std::string_view section_begin, call_begin, args_begin, call_end, section_end;
  enum class Header { kName, kKimiId, kFenced } header;
};

constexpr Markers kKimiK2 = {"<|tool_calls_section_begin|>", "<|tool_call_begin|>",
                             "<|tool_call_argument_begin|>", "<|tool_call_end|>",
                             "<|tool_calls_section_end|>",   Markers::Header::kKimiId};
constexpr Markers kDeepSeekV31 = {"<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>",
                                  "<｜tool▁sep｜>",         "<｜tool▁call▁end｜>",
                                  "<｜tool▁calls▁end｜>",   Markers::Header::kName};
constexpr Markers kDeepSeekV3 = {kDeepSeekV31.section_begin, kDeepSeekV31.call_begin,
                                 kDeepSeekV31.args_begin,    kDeepSeekV31.call_end,
                                 kDeepSeekV31.section_end,   Markers::Header::kFenced};
constexpr std::string_view kFenceOpen = "```json";
constexpr std::string_view kFenceClose = "```";

// The function name of a call header: Kimi's "functions.get_weather:0" -> "get_weather"; ""
// when it is none.
std::string_view call_name(std::string_view header, Markers::Header kind) {
  std::string_view name = trim(header);
  if (kind == Markers::Header::kKimiId) {
    const size_t colon = name.rfind(':');
    if (colon == std::string_view::npos ||
        !std::all_of(name.begin() + static_cast<std::ptrdiff_t>(colon) + 1, name.end(),
                     [](char c) { return c >= '0' && c <= '9'; })) {
      return {};
    }
    name = name.substr(0, colon);
    if (name.starts_with("functions.")) name.remove_prefix(std::string_view("functions.").size());
  }
  if (name.empty() || name.size() > 256 ||
      name.find_first_of(" \t\n<>{}\"") != std::string_view::npos) {
    return {};
  }
  return name;
}

// Whether `so_far`, the text after a call marker, may still grow into a header and the
// separator: a short line, up to a prefix of the separator.
bool header_may_continue(std::string_view so_far, std::string_view args_begin) {
  const size_t lt = so_far.find('<');
  if (lt == std::string_view::npos) {
    return so_far.size() < 256 && so_far.find('\n') == std::string_view::npos;
  }
  return may_become(so_far.substr(lt), args_begin);
}

ParsedOutput parse_marked(std::string_view text, const Markers& m, bool at_end) {
  ParsedOutput out;
  const size_t section = text.find(m.section_begin);
  if (section == std::string_view::npos) {
    add_trailing(out, text, m.section_begin, at_end);
    return out;
  }
  out.content = text.substr(0, section);
  // From `from` on the section is not calls: the rest of the text is content (all of the
  // section, its marker included, when it held no call).
  const auto not_calls = [&](size_t from) {
    add_content(out, text.substr(out.calls.empty() ? section : from));
    return out;
  };
  size_t i = section + m.section_begin.size();
  while (true) {
    const size_t at = skip_space(text, i);
    const std::string_view rest = text.substr(at);
    if (rest.starts_with(m.section_end)) {
      i = at + m.section_end.size();
      break;
    }
    if (!rest.starts_with(m.call_begin)) {
      if (!at_end && (may_become(rest, m.call_begin) || may_become(rest, m.section_end))) {
        return out;
      }
      if (at_end && rest.empty() && !out.calls.empty()) return out;  // cut short after a call
      return not_calls(at);
    }
    const size_t header = at + m.call_begin.size();
    const size_t args_tag = text.find(m.args_begin, header);
    if (args_tag == std::string_view::npos) {  // the header is still coming
      return !at_end && header_may_continue(text.substr(header), m.args_begin) ? out
                                                                               : not_calls(at);
    }
    // The name: between the markers, or (fenced) on the line after the separator.
    size_t name_begin = header, name_end = args_tag;
    size_t a = skip_space(text, args_tag + m.args_begin.size());
    if (m.header == Markers::Header::kFenced) {
      if (trim(text.substr(header, args_tag - header)) != "function") return not_calls(at);
      name_begin = args_tag + m.args_begin.size();
      name_end = text.find('\n', name_begin);
      if (name_end == std::string_view::npos) {
        const bool may_be_name = text.size() - name_begin < 256;
        return !at_end && may_be_name ? out : not_calls(at);
      }
      const size_t fence = skip_space(text, name_end);
      const std::string_view after_name = text.substr(fence);
      if (!after_name.starts_with(kFenceOpen)) {
        return !at_end && may_become(after_name, kFenceOpen) ? out : not_calls(at);
      }
      a = skip_space(text, fence + kFenceOpen.size());
    }
    const std::string_view name =
        call_name(text.substr(name_begin, name_end - name_begin), m.header);
    if (name.empty()) return not_calls(at);
    if (a < text.size() && text[a] != '{') return not_calls(at);
    const JsonValueEnd args = json_value_end(text, a);
    if (args.scan != Scan::kDone) {
      if (at_end) return not_calls(at);
      if (a < text.size()) {
        out.calls.push_back(ToolCall{std::string(name), std::string(text.substr(a))});
      }
      return out;
    }
    const std::string_view value = text.substr(a, args.end - a);
    if (!nlohmann::json::parse(value, nullptr, false).is_object()) return not_calls(at);
    out.calls.push_back(ToolCall{std::string(name), std::string(value)});
    size_t after = skip_space(text, args.end);
    if (m.header == Markers::Header::kFenced) {
      const std::string_view fence = text.substr(after);
      if (fence.starts_with(kFenceClose)) {
        after = skip_space(text, after + kFenceClose.size());
      } else if (!at_end && may_become(fence, kFenceClose)) {
        return out;
      }
    }
    const std::string_view tail = text.substr(after);
    if (tail.starts_with(m.call_end)) {
      i = after + m.call_end.size();
    } else if (!at_end && may_become(tail, m.call_end)) {
      return out;
    } else if (at_end && tail.empty()) {
      return out;  // stopped before the end marker: still a call
    } else {
      i = after;  // the end marker left out: the next marker decides
    }
  }
  const std::string_view after_section = text.substr(i);
  add_content(out, after_section);
  return out;
}

}  // namespace

ParsedOutput parse_kimi_k2(std::string_view text, bool at_end) {
  return parse_marked(text, kKimiK2, at_end);
}

ParsedOutput parse_deepseek_v31(std::string_view text, bool at_end) {
  return parse_marked(text, kDeepSeekV31, at_end);
}

ParsedOutput parse_deepseek_v3(std::string_view text, bool at_end) {
  return parse_marked(text, kDeepSeekV3, at_end);
}

}  // namespace inflight::frontend::tool_call_formats

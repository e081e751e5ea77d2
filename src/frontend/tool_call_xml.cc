// qwen3_coder: <tool_call><function=NAME><parameter=P>VALUE</parameter>...</function></tool_call>
// and seed_oss, the same inside <seed:tool_call> (tool_calls.h). Values are text; the type of P
// in the tool's JSON schema decides what JSON value each becomes, as vLLM's parsers do.
#include <nlohmann/json.hpp>

#include "frontend/tool_call_formats.h"

namespace inflight::frontend::tool_call_formats {

using json = nlohmann::ordered_json;

namespace {

// The tags around one call.
struct Block {
  std::string_view open, close;
};
constexpr Block kQwen3Coder = {"<tool_call>", "</tool_call>"};
constexpr Block kSeedOss = {"<seed:tool_call>", "</seed:tool_call>"};
constexpr std::string_view kFunction = "<function=";
constexpr std::string_view kFunctionEnd = "</function>";
constexpr std::string_view kParameter = "<parameter=";
constexpr std::string_view kParameterEnd = "</parameter>";

// One value between <parameter=P> and </parameter>, without the newline the format puts after
// the opening tag and before the closing one.
std::string strip_newlines(std::string_view v) {
  if (v.starts_with('\n')) v.remove_prefix(1);
  if (v.ends_with('\n')) v.remove_suffix(1);
  return std::string(v);
}

// One <function=...>...</function> at text[i] (after <tool_call>). Returns where its block ends
// (past </function>, or text.size() when still open), or npos when it is not a call.
size_t read_function(std::string_view text, size_t i, const Block& block, const json& tools,
                     bool at_end, ParsedOutput& out, bool& open) {
  open = false;
  const size_t name_end = text.find('>', i + kFunction.size());
  if (name_end == std::string_view::npos) {
    open = !at_end;
    return open ? text.size() : std::string_view::npos;
  }
  const std::string_view name =
      trim(text.substr(i + kFunction.size(), name_end - i - kFunction.size()));
  if (name.empty() || name.find_first_of("<\n") != std::string_view::npos) {
    return std::string_view::npos;
  }
  const json* properties = tool_properties(tools, name);
  ToolCall call{std::string(name), {}};
  size_t num_params = 0;
  size_t j = name_end + 1;
  while (true) {
    j = skip_space(text, j);
    const std::string_view rest = text.substr(j);
    if (rest.starts_with(kFunctionEnd)) {
      j += kFunctionEnd.size();
      break;
    }
    if (rest.starts_with(block.close)) break;  // </function> omitted: the block's end ends it
    if (!rest.starts_with(kParameter)) {
      if (!at_end && (rest.empty() || may_become(rest, kParameter) ||
                      may_become(rest, kFunctionEnd) || may_become(rest, block.close))) {
        open = true;
        break;
      }
      if (!at_end) return std::string_view::npos;
      j = text.size();  // cut short: what came is the call
      break;
    }
    const size_t p_name_end = text.find('>', j + kParameter.size());
    if (p_name_end == std::string_view::npos) {
      open = !at_end;
      j = text.size();
      break;
    }
    const std::string param(
        trim(text.substr(j + kParameter.size(), p_name_end - j - kParameter.size())));
    const size_t v = p_name_end + 1;
    // A value ends at </parameter>, or (a model may omit it) at the next tag: the first of them,
    // so that a stream decides as the whole text does.
    size_t v_end = text.find(kParameterEnd, v);
    for (const std::string_view tag : {kParameter, kFunctionEnd, block.close}) {
      v_end = std::min(v_end, text.find(tag, v));
    }
    size_t next = v_end;
    if (v_end != std::string_view::npos && text.substr(v_end).starts_with(kParameterEnd)) {
      next += kParameterEnd.size();
    }
    if (v_end == std::string_view::npos) {
      if (!at_end) {
        open = true;
        break;
      }
      v_end = next = text.size();
    }
    call.arguments += num_params++ == 0 ? "{" : ", ";
    call.arguments += json_text(param) + ": " +
                      json_text(param_value(strip_newlines(text.substr(v, v_end - v)),
                                            schema_type(properties, param)));
    j = next;
  }
  if (!open) call.arguments += num_params == 0 ? "{}" : "}";
  out.calls.push_back(std::move(call));
  return j;
}

ParsedOutput parse_function_blocks(std::string_view text, const Block& block, const json& tools,
                                   bool at_end) {
  const std::string_view kOpen = block.open, kClose = block.close;
  ParsedOutput out;
  size_t pos = 0;
  while (true) {
    const size_t open_tag = text.find(kOpen, pos);
    if (open_tag == std::string_view::npos) {
      add_trailing(out, text.substr(pos), kOpen, at_end);
      return out;
    }
    add_content(out, text.substr(pos, open_tag - pos));
    const size_t i = skip_space(text, open_tag + kOpen.size());
    const std::string_view body = text.substr(i);
    if (!at_end && (body.empty() || may_become(body, kFunction))) return out;
    bool still_open = false;
    const size_t end = body.starts_with(kFunction)
                           ? read_function(text, i, block, tools, at_end, out, still_open)
                           : std::string_view::npos;
    if (still_open) return out;
    if (end == std::string_view::npos) {  // not a call: the tag is text
      out.content += kOpen;
      pos = open_tag + kOpen.size();
      continue;
    }
    const size_t close = text.find(kClose, end);
    if (close != std::string_view::npos) {
      pos = close + kClose.size();
    } else if (at_end) {
      pos = end;
    } else {
      return out;
    }
  }
}

}  // namespace

ParsedOutput parse_qwen3_coder(std::string_view text, const json& tools, bool at_end) {
  return parse_function_blocks(text, kQwen3Coder, tools, at_end);
}

ParsedOutput parse_seed_oss(std::string_view text, const json& tools, bool at_end) {
  return parse_function_blocks(text, kSeedOss, tools, at_end);
}

}  // namespace inflight::frontend::tool_call_formats

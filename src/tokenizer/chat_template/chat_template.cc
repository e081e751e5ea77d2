#include "tokenizer/chat_template/chat_template.h"

#include <nlohmann/json.hpp>

#include "core/check.h"
#include "tokenizer/chat_template/interpreter.h"
#include "tokenizer/chat_template/parser.h"
#include "tokenizer/chat_template/render_error.h"
#include "tokenizer/chat_template/unicode.h"

namespace inflight {
namespace {

using jinja::Value;

template <typename Json>
Value to_value(const Json& j, std::uint32_t depth = 0) {
  INFLIGHT_CHECK_CODE(depth < jinja::kMaxNesting, ErrorCode::kInvalidArgument,
                      "chat template context nests more than {} levels deep", jinja::kMaxNesting);
  switch (j.type()) {
    case nlohmann::json::value_t::null:
      return Value(nullptr);
    case nlohmann::json::value_t::boolean:
      return Value(j.template get<bool>());
    case nlohmann::json::value_t::number_integer:
      return Value(j.template get<std::int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      const auto u = j.template get<std::uint64_t>();
      if (u <= static_cast<std::uint64_t>(INT64_MAX)) return Value(static_cast<std::int64_t>(u));
      return Value(static_cast<double>(u));
    }
    case nlohmann::json::value_t::number_float:
      return Value(j.template get<double>());
    case nlohmann::json::value_t::string: {
      const auto& s = j.template get_ref<const std::string&>();
      INFLIGHT_CHECK_CODE(jinja::unicode::is_valid_utf8(s), ErrorCode::kInvalidArgument,
                          "chat template context holds a string that is not valid UTF-8");
      return Value(s);
    }
    case nlohmann::json::value_t::array: {
      jinja::ValueList items;
      items.reserve(j.size());
      for (const auto& item : j) items.push_back(to_value(item, depth + 1));
      return Value::list(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      jinja::ValueMap map;
      for (auto it = j.begin(); it != j.end(); ++it) {
        INFLIGHT_CHECK_CODE(jinja::unicode::is_valid_utf8(it.key()), ErrorCode::kInvalidArgument,
                            "chat template context holds a key that is not valid UTF-8");
        map.append_new(Value(it.key()), to_value(it.value(), depth + 1));  // keys are unique
      }
      return Value::dict(std::move(map));
    }
    default:
      INFLIGHT_THROW(ErrorCode::kInvalidArgument,
                     "chat template context holds a value JSON cannot express as text (binary)");
  }
}

template <typename Json>
std::string render_json(const jinja::Program& program, const Json& context,
                        const ChatTemplateRenderOptions& options) {
  INFLIGHT_CHECK_CODE(context.is_object(), ErrorCode::kInvalidArgument,
                      "chat template context must be a JSON object, got {}", context.type_name());
  Value root = to_value(context);
  jinja::Interpreter interp(jinja::RenderSettings{options.fixed_now});
  try {
    return interp.render(program, root.map());
  } catch (const jinja::RenderError& e) {
    if (e.kind() == jinja::RenderError::Kind::kRaised) {
      INFLIGHT_THROW(ErrorCode::kInvalidArgument, "chat template raised an error: {}", e.what());
    }
    INFLIGHT_THROW(ErrorCode::kInvalidArgument, "chat template error at line {}: {}", e.line(),
                   e.what());
  }
}

}  // namespace

ChatTemplate::ChatTemplate(std::shared_ptr<const jinja::Program> program)
    : program_(std::move(program)) {}

ChatTemplate ChatTemplate::parse(std::string source) {
  return ChatTemplate(jinja::parse_program(std::move(source)));
}

std::string ChatTemplate::render(const nlohmann::json& context) const {
  return render_json(*program_, context, {});
}

std::string ChatTemplate::render(const nlohmann::ordered_json& context) const {
  return render_json(*program_, context, {});
}

std::string ChatTemplate::render(const nlohmann::json& context,
                                 const ChatTemplateRenderOptions& options) const {
  return render_json(*program_, context, options);
}

std::string ChatTemplate::render(const nlohmann::ordered_json& context,
                                 const ChatTemplateRenderOptions& options) const {
  return render_json(*program_, context, options);
}

const std::string& ChatTemplate::source() const {
  return program_->source;
}

}  // namespace inflight

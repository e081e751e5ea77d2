#include "tokenizer/chat_template/parser.h"

#include "core/check.h"

namespace inflight::jinja {
namespace {

template <typename Node>
Stmt make_stmt(int line, Node node) {
  Stmt s;
  s.line = line;
  s.node = std::move(node);
  return s;
}

bool contains(std::initializer_list<std::string_view> tags, const std::string& name) {
  for (std::string_view t : tags) {
    if (t == name) return true;
  }
  return false;
}

}  // namespace

Parser::Parser(std::vector<Token> tokens) : toks_(std::move(tokens)) {
  frames_.push_back({});
}

Parser::DepthGuard::DepthGuard(Parser& p) : parser_(p) {
  if (++parser_.depth_ > kMaxDepth) {
    --parser_.depth_;
    parser_.syntax_error(parser_.cur().line, "template nested too deeply");
  }
}

StmtList Parser::parse_template() {
  StmtList body = subparse({});
  for (const UnknownName& u : unknown_) {
    if (!u.soft) syntax_error(u.line, "no " + u.what);
  }
  return body;
}

bool Parser::skip_name(std::string_view name) {
  if (!at_name(name)) return false;
  next();
  return true;
}

bool Parser::skip_op(std::string_view op) {
  if (!at_op(op)) return false;
  next();
  return true;
}

void Parser::expect_op(std::string_view op) {
  if (!skip_op(op)) unexpected("'" + std::string(op) + "'");
}

void Parser::expect_type(TokenType type, std::string_view what) {
  if (cur().type != type) unexpected(what);
  next();
}

std::string Parser::expect_name() {
  if (cur().type != TokenType::kName) unexpected("a name");
  return next().text;
}

void Parser::syntax_error(int line, const std::string& what) const {
  INFLIGHT_THROW(ErrorCode::kInvalidFile, "chat template syntax error at line {}: {}", line, what);
}

void Parser::unexpected(std::string_view expected) const {
  const Token& t = cur();
  std::string got;
  switch (t.type) {
    case TokenType::kData:
      got = "template text";
      break;
    case TokenType::kVariableBegin:
      got = "'{{'";
      break;
    case TokenType::kVariableEnd:
      got = "end of print statement '}}'";
      break;
    case TokenType::kBlockBegin:
      got = "'{%'";
      break;
    case TokenType::kBlockEnd:
      got = "end of statement block '%}'";
      break;
    case TokenType::kEof:
      got = "end of template";
      break;
    case TokenType::kString:
      got = "a string literal";
      break;
    default:
      got = "'" + t.text + "'";
      break;
  }
  syntax_error(t.line, "expected " + std::string(expected) + ", got " + got);
}

void Parser::unsupported(int line, const std::string& what) const {
  INFLIGHT_THROW(ErrorCode::kUnsupported, "chat template line {}: {} is not supported", line, what);
}

StmtList Parser::subparse(EndTags end_tags) {
  DepthGuard guard(*this);
  StmtList body;
  while (true) {
    const Token& t = cur();
    switch (t.type) {
      case TokenType::kData:
        body.push_back(make_stmt(t.line, TextStmt{t.text}));
        next();
        break;
      case TokenType::kVariableBegin: {
        next();
        ExprPtr e = parse_tuple(true);
        const int line = e->line;
        expect_type(TokenType::kVariableEnd, "end of print statement '}}'");
        body.push_back(make_stmt(line, PrintStmt{std::move(e)}));
        break;
      }
      case TokenType::kBlockBegin:
        next();
        if (cur().type == TokenType::kName && contains(end_tags, cur().text)) return body;
        parse_statement(body);
        expect_type(TokenType::kBlockEnd, "end of statement block '%}'");
        break;
      case TokenType::kEof:
        if (end_tags.size() > 0) {
          std::string names;
          for (std::string_view n : end_tags)
            names += (names.empty() ? "'" : " or '") + std::string(n) + "'";
          syntax_error(t.line, "unexpected end of template, expected " + names);
        }
        return body;
      default:
        unexpected("template text or a tag");
    }
  }
}

StmtList Parser::parse_body(EndTags end_tags, bool drop_end) {
  skip_op(":");
  expect_type(TokenType::kBlockEnd, "end of statement block '%}'");
  StmtList body = subparse(end_tags);
  if (drop_end) next();
  return body;
}

StmtList Parser::parse_frame_body(EndTags end_tags, bool drop_end, bool in_loop, MacroDef* macro,
                                  bool* loop_used) {
  const Frame& outer = frames_.back();
  frames_.push_back(Frame{false, in_loop, macro != nullptr ? macro : outer.macro,
                          loop_used != nullptr ? loop_used : outer.loop_used});
  StmtList body = parse_body(end_tags, drop_end);
  frames_.pop_back();
  return body;
}

void Parser::parse_statement(StmtList& out) {
  const int line = cur().line;
  if (cur().type != TokenType::kName) unexpected("a tag name");
  const std::string tag = next().text;
  if (tag == "for") return out.push_back(parse_for(line));
  if (tag == "if") return out.push_back(parse_if(line));
  if (tag == "set") return out.push_back(parse_set(line));
  if (tag == "macro") return out.push_back(parse_macro(line));
  if (tag == "call") return out.push_back(parse_call_block(line));
  if (tag == "filter") return out.push_back(parse_filter_block(line));
  if (tag == "with") return out.push_back(parse_with(line));
  if (tag == "print") {
    for (bool first = true; cur().type != TokenType::kBlockEnd; first = false) {
      if (!first) expect_op(",");
      out.push_back(make_stmt(line, PrintStmt{parse_expression()}));
    }
    return;
  }
  if (tag == "break" || tag == "continue") {
    if (!frames_.back().in_loop) syntax_error(line, "'" + tag + "' outside of a for loop");
    return out.push_back(make_stmt(line, LoopControlStmt{tag == "break"}));
  }
  if (tag == "generation") {
    return out.push_back(
        make_stmt(line, ScopeStmt{parse_frame_body({"endgeneration"}, true, false, nullptr)}));
  }
  if (tag == "extends" || tag == "block" || tag == "include" || tag == "import" || tag == "from" ||
      tag == "autoescape") {
    unsupported(line, "the '{% " + tag + " %}' tag");
  }
  syntax_error(line, "encountered unknown tag '" + tag + "'");
}

Stmt Parser::parse_for(int line) {
  ForStmt s;
  s.target = parse_target(false, "in");
  if (!skip_name("in")) unexpected("'in'");
  s.iterable = parse_tuple(false, "recursive");
  if (skip_name("if")) {
    frames_.push_back(Frame{false, false, frames_.back().macro, frames_.back().loop_used});
    s.filter = parse_expression();
    frames_.pop_back();
  }
  if (at_name("recursive")) unsupported(line, "a recursive for loop");
  bool uses_loop = false;
  s.body = parse_frame_body({"endfor", "else"}, false, true, nullptr, &uses_loop);
  s.uses_loop = uses_loop;
  if (next().text == "else") {
    s.otherwise = parse_frame_body({"endfor"}, true, frames_.back().in_loop, nullptr);
  }
  return make_stmt(line, std::move(s));
}

Stmt Parser::parse_if(int line) {
  IfStmt s;
  const bool was_soft = frames_.back().soft;
  frames_.back().soft = true;
  while (true) {
    ExprPtr test = parse_tuple(false);
    StmtList body = parse_body({"elif", "else", "endif"}, false);
    s.branches.emplace_back(std::move(test), std::move(body));
    const std::string tag = next().text;
    if (tag == "elif") continue;
    if (tag == "else") s.otherwise = parse_body({"endif"}, true);
    break;
  }
  frames_.back().soft = was_soft;
  return make_stmt(line, std::move(s));
}

Stmt Parser::parse_set(int line) {
  Target target = parse_target(true, {});
  if (skip_op("=")) return make_stmt(line, SetStmt{std::move(target), parse_tuple()});
  SetBlockStmt s;
  s.target = std::move(target);
  if (at_op("|")) s.filter = parse_filter_chain(nullptr, false);
  s.body = parse_frame_body({"endset"}, true, frames_.back().in_loop, nullptr);
  return make_stmt(line, std::move(s));
}

Target Parser::parse_target(bool with_namespace, std::string_view extra_end) {
  Target t;
  while (true) {
    if (!t.names.empty() && is_tuple_end(extra_end)) break;
    const int line = cur().line;
    std::string name = expect_name();
    if (name == "true" || name == "false" || name == "none" || name == "True" || name == "False" ||
        name == "None") {
      syntax_error(line, "can't assign to the constant '" + name + "'");
    }
    if (with_namespace && skip_op(".")) {
      if (t.unpack) syntax_error(line, "can't assign to a namespace attribute in a tuple");
      t.ns_attr = expect_name();
      t.names.push_back(std::move(name));
      break;
    }
    t.names.push_back(std::move(name));
    if (!skip_op(",")) break;
    t.unpack = true;
  }
  return t;
}

void Parser::parse_signature(MacroDef& def) {
  expect_op("(");
  while (!at_op(")")) {
    if (!def.params.empty()) expect_op(",");
    const int line = cur().line;
    def.params.push_back(expect_name());
    if (skip_op("=")) {
      def.defaults.push_back(parse_expression());
    } else if (!def.defaults.empty()) {
      syntax_error(line, "non-default argument follows default argument");
    }
  }
  expect_op(")");
}

Stmt Parser::parse_macro(int line) {
  auto def = std::make_shared<MacroDef>();
  def->name = expect_name();
  parse_signature(*def);
  def->body = parse_frame_body({"endmacro"}, true, false, def.get());
  return make_stmt(line, MacroStmt{std::move(def)});
}

Stmt Parser::parse_call_block(int line) {
  auto caller = std::make_shared<MacroDef>();
  caller->name = "caller";
  if (at_op("(")) parse_signature(*caller);
  ExprPtr call = parse_expression();
  if (!std::holds_alternative<CallExpr>(call->node)) syntax_error(line, "expected a call");
  caller->body = parse_frame_body({"endcall"}, true, false, caller.get());
  return make_stmt(line, CallBlockStmt{std::move(caller), std::move(call)});
}

Stmt Parser::parse_filter_block(int line) {
  ExprPtr filter = parse_filter_chain(nullptr, true);
  StmtList body = parse_frame_body({"endfilter"}, true, frames_.back().in_loop, nullptr);
  return make_stmt(line, FilterBlockStmt{std::move(filter), std::move(body)});
}

Stmt Parser::parse_with(int line) {
  WithStmt s;
  while (cur().type != TokenType::kBlockEnd) {
    if (!s.assignments.empty()) expect_op(",");
    Target target = parse_target(false, {});
    expect_op("=");
    s.assignments.emplace_back(std::move(target), parse_expression());
  }
  s.body = parse_frame_body({"endwith"}, true, frames_.back().in_loop, nullptr);
  return make_stmt(line, std::move(s));
}

}  // namespace inflight::jinja

namespace inflight::jinja {

std::shared_ptr<const Program> parse_program(std::string source) {
  auto program = std::make_shared<Program>();
  Parser parser(tokenize(source));
  program->body = parser.parse_template();
  program->source = std::move(source);
  return program;
}

}  // namespace inflight::jinja

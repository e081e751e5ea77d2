#include "tokenizer/regex_split.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "core/check.h"
#include "tokenizer/utf8.h"

namespace inflight {

namespace {

// Per-thread scratch: one match data block (big enough for any of our patterns' captures) and
// one JIT stack, shared by all regexes on the thread.
struct ThreadScratch {
  pcre2_match_data* match_data = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* jit_stack = nullptr;
  ThreadScratch() {
    match_data = pcre2_match_data_create(64, nullptr);
    context = pcre2_match_context_create(nullptr);
    // 32 KiB start, 4 MiB cap: ample for alternations of simple loops on any input length.
    jit_stack = pcre2_jit_stack_create(32 * 1024, 4 * 1024 * 1024, nullptr);
    if (context && jit_stack) pcre2_jit_stack_assign(context, nullptr, jit_stack);
  }
  ~ThreadScratch() {
    pcre2_jit_stack_free(jit_stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(match_data);
  }
};

ThreadScratch& scratch() {
  thread_local ThreadScratch s;
  return s;
}

}  // namespace

Regex::Regex(std::string_view pattern) : pattern_(pattern) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  // DOLLAR_ENDONLY: "$" means the end of the piece, as in the ECMAScript/Rust engines the
  // patterns were written for (PCRE's default also matches before a final newline).
  pcre2_code* code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern_.data()), pattern_.size(),
                    PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &error, &offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    INFLIGHT_THROW(ErrorCode::kInvalidFile,
                   "pre-tokenizer regex '{}' does not compile at offset {}: {}", pattern_, offset,
                   reinterpret_cast<const char*>(message));
  }
  // JIT is an optimisation: the interpreter gives the same matches if it is unavailable.
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  code_ = code;
}

Regex::~Regex() {
  pcre2_code_free(static_cast<pcre2_code*>(code_));
}

void Regex::find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const {
  ThreadScratch& s = scratch();
  INFLIGHT_CHECK_CODE(s.match_data != nullptr, ErrorCode::kOutOfMemory,
                      "cannot allocate PCRE2 match data");
  auto* code = static_cast<pcre2_code*>(code_);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t start = 0;
  while (start <= text.size()) {
    const int rc =
        pcre2_match(code, subject, text.size(), start, PCRE2_NO_UTF_CHECK, s.match_data, s.context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(rc, message, sizeof(message));
      INFLIGHT_THROW(ErrorCode::kInternal, "pre-tokenizer regex '{}' failed on {} bytes: {}",
                     pattern_, text.size(), reinterpret_cast<const char*>(message));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(s.match_data);
    const size_t b = ov[0], e = ov[1];
    if (e > b) {
      out.emplace_back(b, e);
      start = e;
    } else {
      // Empty match: step over one character and search again.
      if (b >= text.size()) break;
      start = b + utf8::sequence_length(static_cast<uint8_t>(text[b]));
    }
  }
}

void split_by_spans(std::string_view text, const std::vector<std::pair<size_t, size_t>>& spans,
                    SplitBehavior behavior, bool invert, std::vector<std::string_view>& out) {
  // Pieces as (begin, end, is_match) in order, covering the text.
  struct Piece {
    size_t b, e;
    bool match;
  };
  std::vector<Piece> pieces;
  pieces.reserve(spans.size() * 2 + 1);
  size_t pos = 0;
  for (const auto& [b, e] : spans) {
    if (b > pos) pieces.push_back({pos, b, invert});
    pieces.push_back({b, e, !invert});
    pos = e;
  }
  if (pos < text.size()) pieces.push_back({pos, text.size(), invert});

  auto emit = [&](size_t b, size_t e) {
    if (e > b) out.push_back(text.substr(b, e - b));
  };
  switch (behavior) {
    case SplitBehavior::kIsolated:
      for (const Piece& p : pieces) emit(p.b, p.e);
      break;
    case SplitBehavior::kRemoved:
      for (const Piece& p : pieces) {
        if (!p.match) emit(p.b, p.e);
      }
      break;
    case SplitBehavior::kContiguous: {
      size_t i = 0;
      while (i < pieces.size()) {
        size_t j = i + 1;
        while (pieces[i].match && j < pieces.size() && pieces[j].match) ++j;
        emit(pieces[i].b, pieces[j - 1].e);
        i = j;
      }
      break;
    }
    case SplitBehavior::kMergedWithPrevious: {
      // A match closes the current piece.
      size_t begin = 0;
      bool open = false;
      for (const Piece& p : pieces) {
        if (!open) begin = p.b;
        open = true;
        if (p.match) {
          emit(begin, p.e);
          open = false;
        }
      }
      if (open) emit(begin, text.size());
      break;
    }
    case SplitBehavior::kMergedWithNext: {
      // A match opens a new piece.
      size_t begin = 0;
      for (const Piece& p : pieces) {
        if (p.match && p.b > begin) {
          emit(begin, p.b);
          begin = p.b;
        }
      }
      emit(begin, text.size());
      break;
    }
  }
}

void split_by_regex(const Regex& regex, std::string_view text, SplitBehavior behavior, bool invert,
                    std::vector<std::string_view>& out) {
  thread_local std::vector<std::pair<size_t, size_t>> spans;
  spans.clear();
  regex.find_all(text, spans);
  split_by_spans(text, spans, behavior, invert, out);
}

}  // namespace inflight

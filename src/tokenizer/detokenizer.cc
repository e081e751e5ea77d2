#include "tokenizer/detokenizer.h"

#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace inflight {

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special,
                                               std::span<const int32_t> context)
    : tokenizer_(tokenizer), skip_special_(skip_special) {
  // decode() strips the leading space of the first piece that is not skipped; after context
  // that contains such a piece the new tokens are not first.
  for (int32_t id : context) {
    if (!(skip_special_ && tokenizer_.is_special(id))) {
      first_ = false;
      break;
    }
  }
}

std::string IncrementalDetokenizer::push(int32_t id) {
  if (id >= tokenizer_.vocab_size()) {  // a model's padding id: nothing, as in decode()
    ++num_tokens_;
    return {};
  }
  const std::string piece = tokenizer_.token_piece(id, skip_special_, first_);  // validates id
  ++num_tokens_;
  if (skip_special_ && tokenizer_.is_special(id)) return {};
  first_ = false;
  pending_.append(piece);
  return emit(/*final=*/false);
}

std::string IncrementalDetokenizer::finish() {
  return emit(/*final=*/true);
}

std::string IncrementalDetokenizer::emit(bool final) {
  std::string out;
  const size_t consumed = utf8::repair(pending_, out, final);
  pending_.erase(0, consumed);
  text_.append(out);
  return out;
}

}  // namespace inflight

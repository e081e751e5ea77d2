#include "tokenizer/normalizer.h"

#include "core/check.h"
#include "tokenizer/unicode_nfc.h"

namespace inflight {

void Normalizer::add_replace(std::string from, std::string to) {
  INFLIGHT_CHECK_CODE(!from.empty(), ErrorCode::kInvalidFile,
                      "normalizer Replace has an empty pattern");
  steps_.push_back({Step::Kind::kReplace, std::move(from), std::move(to)});
}

void Normalizer::add_space_prefix(std::string s, PrefixWhen when, bool skip_if_present) {
  Step step{Step::Kind::kSpacePrefix, std::move(s), {}};
  step.when = when;
  step.skip_if_present = skip_if_present;
  steps_.push_back(std::move(step));
}

std::string_view Normalizer::apply(std::string_view text, const FragmentContext& ctx,
                                   std::string& storage) const {
  std::string_view cur = text;
  std::string tmp;
  // Each changing step writes a new string; `cur` views either `text` or `storage`.
  auto replace_cur = [&](std::string&& next) {
    storage = std::move(next);
    cur = storage;
  };
  for (const Step& s : steps_) {
    switch (s.kind) {
      case Step::Kind::kNfc:
        if (!unicode::is_nfc_quick(cur)) replace_cur(unicode::nfc(cur));
        break;
      case Step::Kind::kPrepend:
        if (!cur.empty()) replace_cur(s.a + std::string(cur));
        break;
      case Step::Kind::kReplace: {
        if (cur.find(s.a) == std::string_view::npos) break;
        tmp.clear();
        size_t pos = 0;
        while (true) {
          const size_t hit = cur.find(s.a, pos);
          if (hit == std::string_view::npos) break;
          tmp.append(cur.substr(pos, hit - pos));
          tmp.append(s.b);
          pos = hit + s.a.size();
        }
        tmp.append(cur.substr(pos));
        replace_cur(std::move(tmp));
        tmp = std::string();
        break;
      }
      case Step::Kind::kSpacePrefix: {
        bool want = false;
        switch (s.when) {
          case PrefixWhen::kAlways:
            want = true;
            break;
          case PrefixWhen::kAtStart:
            want = ctx.at_start;
            break;
          case PrefixWhen::kAtStartOrAfterSpecial:
            want = ctx.at_start || ctx.after_special;
            break;
        }
        if (want && s.skip_if_present && cur.substr(0, s.a.size()) == s.a) want = false;
        if (want) replace_cur(s.a + std::string(cur));
        break;
      }
    }
  }
  return cur;
}

}  // namespace inflight

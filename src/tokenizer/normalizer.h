// Normalizer: rewrites one text fragment (text between special tokens) before pre-tokenizing.
//
// A sequence of steps, each a Hugging Face normalizer or a llama.cpp rule:
//   NFC                      Unicode canonical composition (Qwen2/3)
//   Prepend(s)               s + text, for every non-empty fragment (HF "Prepend")
//   Replace(a, b)            every literal a -> b (HF "Replace" with a String pattern)
//   SpacePrefix(s, when)     s + text depending on where the fragment sits: llama.cpp's SPM
//                            "add_space_prefix" (at the start or after a special token), or
//                            HF Metaspace's prepend_scheme "first" / "always"
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace inflight {

// Where a fragment sits in the encoded text.
struct FragmentContext {
  bool at_start = true;        // the fragment begins at offset 0 of the input
  bool after_special = false;  // the previous fragment was a special/added token
};

enum class PrefixWhen {
  kAlways,                 // every fragment (HF Metaspace "always")
  kAtStart,                // only the fragment at offset 0 (HF Metaspace "first")
  kAtStartOrAfterSpecial,  // llama.cpp SPM: first fragment, or one that follows a special token
};

class Normalizer {
 public:
  struct Step {
    enum class Kind { kNfc, kPrepend, kReplace, kSpacePrefix } kind;
    std::string a;  // Prepend/SpacePrefix: the prefix; Replace: the pattern
    std::string b;  // Replace: the replacement
    PrefixWhen when = PrefixWhen::kAlways;
    bool skip_if_present = false;  // SpacePrefix: not when the text already starts with `a`
  };

  void add_nfc() { steps_.push_back({Step::Kind::kNfc, {}, {}}); }
  void add_prepend(std::string s) { steps_.push_back({Step::Kind::kPrepend, std::move(s), {}}); }
  void add_replace(std::string from, std::string to);
  void add_space_prefix(std::string s, PrefixWhen when, bool skip_if_present);

  bool empty() const { return steps_.empty(); }

  // The normalized fragment: `text` itself when no step changes it, else a view of `storage`.
  std::string_view apply(std::string_view text, const FragmentContext& ctx,
                         std::string& storage) const;

 private:
  std::vector<Step> steps_;
};

}  // namespace inflight

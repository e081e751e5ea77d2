#include "tokenizer/special_tokens.h"

#include <algorithm>
#include <cctype>

namespace inflight {

namespace {

bool is_space(char c) {
  return std::isspace(static_cast<unsigned char>(c)) != 0;
}

}  // namespace

SpecialTokens::SpecialTokens(std::vector<Entry> entries, Rule rule)
    : entries_(std::move(entries)), rule_(rule) {
  std::erase_if(entries_, [](const Entry& e) { return e.text.empty(); });
  // Longest first; equal lengths by id so the order is deterministic.
  std::stable_sort(entries_.begin(), entries_.end(), [](const Entry& a, const Entry& b) {
    return a.text.size() != b.text.size() ? a.text.size() > b.text.size() : a.id < b.id;
  });
  by_first_byte_.assign(256, {});
  for (uint32_t i = 0; i < entries_.size(); ++i) {
    by_first_byte_[static_cast<uint8_t>(entries_[i].text[0])].push_back(i);
  }
}

void SpecialTokens::split(std::string_view text, bool parse_special,
                          std::vector<Fragment>& out) const {
  if (text.empty()) return;
  if (rule_ == Rule::kLongestTokenFirst) {
    split_longest_first(text, parse_special, out);
  } else {
    split_leftmost_longest(text, parse_special, out);
  }
}

void SpecialTokens::split_longest_first(std::string_view text, bool parse_special,
                                        std::vector<Fragment>& out) const {
  // Mirrors llama.cpp's tokenizer_st_partition: fragments are refined token by token.
  std::vector<Fragment> cur{{-1, 0, text.size()}};
  std::vector<Fragment> next;
  for (const Entry& e : entries_) {
    if (!parse_special && !e.always) continue;
    next.clear();
    for (const Fragment& f : cur) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      size_t b = f.begin;
      const size_t end = f.end;
      while (b < end) {
        const size_t hit = text.substr(0, end).find(e.text, b);
        if (hit == std::string_view::npos) break;
        size_t left_end = hit;
        if (e.lstrip) {
          while (left_end > b && is_space(text[left_end - 1])) --left_end;
        }
        if (left_end > b) next.push_back({-1, b, left_end});
        next.push_back({e.id, hit, hit + e.text.size()});
        b = hit + e.text.size();
        if (e.rstrip) {
          while (b < end && is_space(text[b])) ++b;
        }
      }
      if (b < end) next.push_back({-1, b, end});
    }
    cur.swap(next);
  }
  out.insert(out.end(), cur.begin(), cur.end());
}

void SpecialTokens::split_leftmost_longest(std::string_view text, bool parse_special,
                                           std::vector<Fragment>& out) const {
  size_t text_begin = 0;  // start of the pending text fragment
  size_t pos = 0;
  while (pos < text.size()) {
    const Entry* match = nullptr;
    for (uint32_t i : by_first_byte_[static_cast<uint8_t>(text[pos])]) {
      const Entry& e = entries_[i];
      if ((parse_special || e.always) && text.compare(pos, e.text.size(), e.text) == 0) {
        match = &e;  // longest first: the first hit is the longest
        break;
      }
    }
    if (match == nullptr) {
      ++pos;
      continue;
    }
    size_t left_end = pos;
    if (match->lstrip) {
      while (left_end > text_begin && is_space(text[left_end - 1])) --left_end;
    }
    if (left_end > text_begin) out.push_back({-1, text_begin, left_end});
    out.push_back({match->id, pos, pos + match->text.size()});
    pos += match->text.size();
    if (match->rstrip) {
      while (pos < text.size() && is_space(text[pos])) ++pos;
    }
    text_begin = pos;
  }
  if (text_begin < text.size()) out.push_back({-1, text_begin, text.size()});
}

}  // namespace inflight

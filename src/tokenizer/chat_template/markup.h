// HTML escaping as markupsafe does it, for |escape and Markup (|safe) concatenation.
#pragma once

#include <string>
#include <string_view>

#include "tokenizer/chat_template/value.h"

namespace inflight::jinja {

// & < > " ' -> &amp; &lt; &gt; &#34; &#39;
std::string html_escape(std::string_view s);

// markupsafe.escape(v): a Markup as is, anything else str(v) escaped, as a Markup.
Value escape_to_markup(const Value& v);

// The str result of a str method called on `self`, as a Markup if self is one.
inline Value same_kind(const Value& self, std::string s) {
  return self.is_markup() ? Value::markup(std::move(s)) : Value(std::move(s));
}

}  // namespace inflight::jinja

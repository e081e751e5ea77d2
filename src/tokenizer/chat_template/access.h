// Attribute and item access as jinja2's sandbox does it:
//   obj.name    a Python attribute (str/dict/list methods) first, then the item obj["name"];
//   obj[key]    the item first, then (for a string key) the attribute.
// A missing attribute, key or index gives an undefined value (printing it is empty); using an
// undefined *object* this way raises, as jinja2's default Undefined does. Refused attributes
// (list.append, names starting with "_" on str/list) give an unsafe undefined.
#pragma once

#include <optional>
#include <string_view>

#include "tokenizer/chat_template/value.h"

namespace inflight::jinja {

Value get_attr(const Value& object, std::string_view name);
Value get_item(const Value& object, const Value& key);
// object[start:stop:step] with Python semantics; non-sliceable objects give undefined.
Value get_slice(const Value& object, const Value& start, const Value& stop, const Value& step);

}  // namespace inflight::jinja

// Python str methods, on UTF-8 strings with code point indices.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace inflight::jinja::str {

// chars == nullopt: strip Unicode whitespace.
std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left,
                  bool right);
// sep == nullopt: split on whitespace runs. maxsplit < 0: no limit.
std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep,
                               long long maxsplit);
std::vector<std::string> rsplit(std::string_view s, const std::optional<std::string>& sep,
                                long long maxsplit);
std::vector<std::string> splitlines(std::string_view s, bool keepends);
std::string replace(std::string_view s, std::string_view old, std::string_view replacement,
                    long long count);
// Code point index of sub in s[start:end] (Python slice bounds), or -1.
long long find(std::string_view s, std::string_view sub, long long start, long long end,
               bool reverse);
long long count(std::string_view s, std::string_view sub, long long start, long long end);
std::string pad(std::string_view s, long long width, std::string_view fill, char align);

}  // namespace inflight::jinja::str

// API-key checks. The comparison takes the same time whatever the key's content, so a client
// cannot find the key a byte at a time by timing 401s.
#pragma once

#include <string>
#include <string_view>

namespace inflight::server {

// Compares all of max(|a|, |b|) bytes; the time depends only on the lengths.
bool constant_time_equal(std::string_view a, std::string_view b);

// True when `authorization` is "Bearer <key>" (scheme case-insensitive) with the right key.
bool authorization_matches(const std::string* authorization, std::string_view key);

}  // namespace inflight::server

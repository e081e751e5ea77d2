#include "server/host_check.h"

#include <arpa/inet.h>

#include <array>

namespace inflight::server {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

std::string_view strip_brackets(std::string_view host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    return host.substr(1, host.size() - 2);
  }
  return host;
}

// "name:port", "[v6]:port", "name" -> {name, port}; a bare IPv6 address has no port.
std::pair<std::string_view, std::string_view> split_port(std::string_view value) {
  if (!value.empty() && value.front() == '[') {
    size_t close = value.find(']');
    if (close == std::string_view::npos) return {value, {}};
    std::string_view rest = value.substr(close + 1);
    return {value.substr(0, close + 1), rest.starts_with(':') ? rest.substr(1) : rest};
  }
  size_t colon = value.rfind(':');
  if (colon == std::string_view::npos || value.find(':') != colon) return {value, {}};
  return {value.substr(0, colon), value.substr(colon + 1)};
}

// An IPv6 address gets its brackets, as it appears in a Host header.
std::string host_form(std::string_view host) {
  std::string h = lower(strip_brackets(host));
  return h.find(':') != std::string::npos ? "[" + h + "]" : h;
}

}  // namespace

bool is_loopback_host(std::string_view host) {
  const std::string h = lower(strip_brackets(host));
  if (h == "localhost") return true;
  std::array<unsigned char, 16> addr{};
  if (inet_pton(AF_INET, h.c_str(), addr.data()) == 1) return addr[0] == 127;
  if (inet_pton(AF_INET6, h.c_str(), addr.data()) == 1) {
    static constexpr std::array<unsigned char, 16> kLoopback6{0, 0, 0, 0, 0, 0, 0, 0,
                                                              0, 0, 0, 0, 0, 0, 0, 1};
    return addr == kLoopback6;
  }
  return false;
}

HostCheck::HostCheck(std::string_view bind_host, const std::vector<std::string>& allowed) {
  bool any = false;
  for (const auto& entry : allowed) any = any || entry == "*";
  enabled_ = !any && (is_loopback_host(bind_host) || !allowed.empty());
  if (!enabled_) return;
  for (std::string_view served : {std::string_view("localhost"), std::string_view("127.0.0.1"),
                                  std::string_view("[::1]"), bind_host}) {
    names_.push_back({host_form(served), {}, true});
  }
  for (const auto& entry : allowed) {
    auto [name, port] = split_port(entry);
    names_.push_back({host_form(name), std::string(port), false});
  }
}

bool HostCheck::allows(const std::string* host, int port) const {
  if (!enabled_) return true;
  if (host == nullptr) return false;
  auto [name, given_port] = split_port(*host);
  const std::string wanted = host_form(name);
  const std::string bound = std::to_string(port);
  for (const auto& n : names_) {
    if (n.host != wanted) continue;
    if (n.served && (given_port.empty() || given_port == bound)) return true;
    if (!n.served && (n.port.empty() || n.port == given_port)) return true;
  }
  return false;
}

}  // namespace inflight::server

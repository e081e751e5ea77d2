// Host header check: the defence against DNS rebinding. A page on attacker.example whose name
// is re-pointed at 127.0.0.1 can make a browser send requests to a server on loopback, but
// the browser still sends "Host: attacker.example"; answering only the names this server is
// served under makes those requests fail (400 "Invalid host header").
//
//   bound to loopback (127.0.0.0/8, ::1, localhost)   checked: localhost, 127.0.0.1, [::1],
//                                                     the bind address, and --allowed-hosts
//   bound elsewhere (0.0.0.0, a LAN address)          checked only when --allowed-hosts is
//                                                     given (against the same names)
//   --allowed-hosts contains "*"                      not checked
//
// The served names match with no port or with the bound port; an --allowed-hosts entry with a
// port must match exactly, one without matches any port (a proxy in front may use its own).
// Names compare case-insensitively.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace inflight::server {

// True for "localhost", an address in 127.0.0.0/8 and "::1" (brackets allowed).
bool is_loopback_host(std::string_view host);

class HostCheck {
 public:
  // `bind_host`: the address listened on; `allowed`: --allowed-hosts entries.
  HostCheck(std::string_view bind_host, const std::vector<std::string>& allowed);

  // False when every Host is accepted.
  bool enabled() const { return enabled_; }
  // True when `host` (a Host header's value; nullptr when absent) names this server, listening
  // on `port`. A missing Host passes only when the check is off.
  bool allows(const std::string* host, int port) const;

 private:
  struct Name {
    std::string host;  // lower case; an IPv6 address in brackets
    std::string port;  // empty: any port (allowed entries) or none/the bound port (served)
    bool served = false;
  };
  bool enabled_ = false;
  std::vector<Name> names_;
};

}  // namespace inflight::server

# Writes a C++ source that holds one file's bytes as a raw string literal, so the binary serves
# its static assets with nothing to install beside it (server/assets/assets.h).
#   cmake -DINPUT=<file> -DOUTPUT=<file.cc> -DFUNCTION=<name> -DKIND=text|page -P embed_asset.cmake
# KIND text: std::string_view FUNCTION(). KIND page (HTML): Page FUNCTION(), which adds the
# Content-Security-Policy sources ('sha256-<base64>') of the page's inline <script> and <style>
# elements, so that its policy allows exactly those.
cmake_minimum_required(VERSION 3.25)
set(_delimiter "inflight_asset")
file(READ "${INPUT}" _content)
string(FIND "${_content}" ")${_delimiter}\"" _clash)
if(NOT _clash EQUAL -1)
  message(FATAL_ERROR "${INPUT} contains the raw-string delimiter )${_delimiter}\"")
endif()

# The base64 of the bytes written in hex.
function(hex_to_base64 hex out)
  set(_alphabet "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
  string(LENGTH "${hex}" _n)
  set(_result "")
  set(_i 0)
  while(_i LESS _n)
    string(SUBSTRING "${hex}" ${_i} 6 _group)
    string(LENGTH "${_group}" _len)
    math(EXPR _bytes "${_len} / 2")
    string(APPEND _group "000000")
    string(SUBSTRING "${_group}" 0 6 _group)
    math(EXPR _v "0x${_group}")
    foreach(_shift 18 12 6 0)
      math(EXPR _index "(${_v} >> ${_shift}) & 63")
      string(SUBSTRING "${_alphabet}" ${_index} 1 _c)
      string(APPEND _result "${_c}")
    endforeach()
    if(_bytes LESS 3)
      math(EXPR _drop "3 - ${_bytes}")
      string(LENGTH "${_result}" _all)
      math(EXPR _cut "${_all} - ${_drop}")
      string(SUBSTRING "${_result}" 0 ${_cut} _result)
      foreach(_pad RANGE 1 ${_drop})
        string(APPEND _result "=")
      endforeach()
    endif()
    math(EXPR _i "${_i} + 6")
  endwhile()
  set(${out} "${_result}" PARENT_SCOPE)
endfunction()

# The CSP hash sources of every <tag>...</tag> in the content, space-separated.
function(inline_hashes content tag out)
  set(_sources "")
  set(_rest "${content}")
  while(TRUE)
    string(FIND "${_rest}" "<${tag}>" _open)
    if(_open EQUAL -1)
      break()
    endif()
    string(LENGTH "<${tag}>" _skip)
    math(EXPR _start "${_open} + ${_skip}")
    string(SUBSTRING "${_rest}" ${_start} -1 _rest)
    string(FIND "${_rest}" "</${tag}>" _close)
    if(_close EQUAL -1)
      message(FATAL_ERROR "${INPUT}: <${tag}> without </${tag}>")
    endif()
    string(SUBSTRING "${_rest}" 0 ${_close} _body)
    string(SHA256 _hex "${_body}")
    hex_to_base64(${_hex} _b64)
    list(APPEND _sources "'sha256-${_b64}'")
    string(SUBSTRING "${_rest}" ${_close} -1 _rest)
  endwhile()
  list(JOIN _sources " " _joined)
  set(${out} "${_joined}" PARENT_SCOPE)
endfunction()

get_filename_component(_name "${INPUT}" NAME)
set(_literal "R\"${_delimiter}(${_content})${_delimiter}\"")
if(KIND STREQUAL "page")
  inline_hashes("${_content}" script _scripts)
  inline_hashes("${_content}" style _styles)
  string(CONCAT _body "Page ${FUNCTION}() {\n  return {${_literal},\n"
                      "          \"${_scripts}\",\n          \"${_styles}\"};\n}\n")
else()
  set(_body "std::string_view ${FUNCTION}() {\n  return ${_literal};\n}\n")
endif()
file(WRITE "${OUTPUT}"
  "// Generated from ${_name} by embed_asset.cmake; do not edit.\n"
  "#include \"server/assets/assets.h\"\n\n"
  "namespace inflight::server::assets {\n\n"
  "${_body}\n"
  "}  // namespace inflight::server::assets\n")

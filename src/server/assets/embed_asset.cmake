# Writes a C++ source that returns the bytes of one file as a std::string_view (a raw string
# literal), so the binary serves its static assets with nothing to install beside it.
#   cmake -DINPUT=<file> -DOUTPUT=<file.cc> -DFUNCTION=<name> -P embed_asset.cmake
set(_delimiter "inflight_asset")
file(READ "${INPUT}" _content)
string(FIND "${_content}" ")${_delimiter}\"" _clash)
if(NOT _clash EQUAL -1)
  message(FATAL_ERROR "${INPUT} contains the raw-string delimiter )${_delimiter}\"")
endif()
get_filename_component(_name "${INPUT}" NAME)
file(WRITE "${OUTPUT}"
  "// Generated from ${_name} by embed_asset.cmake; do not edit.\n"
  "#include \"server/assets/assets.h\"\n\n"
  "namespace inflight::server::assets {\n\n"
  "std::string_view ${FUNCTION}() {\n"
  "  return R\"${_delimiter}(${_content})${_delimiter}\";\n"
  "}\n\n"
  "}  // namespace inflight::server::assets\n")

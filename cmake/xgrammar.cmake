# XGrammar's C++ core as a static library (target `xgrammar`): the grammar engine behind
# src/grammar. scripts/install_deps.sh unpacks its PyPI sdist into .deps/; its Python bindings,
# tests and cpptrace are left out, and its own warnings are not ours to fix.
set(INFLIGHT_XGRAMMAR_DIR ${CMAKE_SOURCE_DIR}/.deps/xgrammar-0.2.8 CACHE PATH
    "XGrammar 0.2.8 sources (the PyPI sdist, unpacked)")
if(NOT EXISTS ${INFLIGHT_XGRAMMAR_DIR}/include/xgrammar/xgrammar.h)
  message(FATAL_ERROR "XGrammar sources not found in ${INFLIGHT_XGRAMMAR_DIR}: run "
                      "scripts/install_deps.sh (or set INFLIGHT_XGRAMMAR_DIR)")
endif()
file(GLOB _xgrammar_sources ${INFLIGHT_XGRAMMAR_DIR}/cpp/*.cc
     ${INFLIGHT_XGRAMMAR_DIR}/cpp/support/*.cc ${INFLIGHT_XGRAMMAR_DIR}/cpp/converter_ext/*.cc)
add_library(xgrammar STATIC ${_xgrammar_sources})
set_target_properties(xgrammar PROPERTIES CXX_STANDARD 17 CXX_EXTENSIONS OFF)
target_compile_options(xgrammar PRIVATE -w)
if(INFLIGHT_SANITIZE OR INFLIGHT_FUZZ)
  # Sanitizer and fuzzer builds instrument our code, not the grammar engine's, and keep no debug
  # information for it: the largest files compile several times faster.
  target_compile_options(xgrammar PRIVATE -g0 -fno-sanitize=all)
endif()
target_compile_definitions(xgrammar PUBLIC XGRAMMAR_ENABLE_CPPTRACE=0)
target_include_directories(xgrammar SYSTEM PUBLIC ${INFLIGHT_XGRAMMAR_DIR}/include
                           ${INFLIGHT_XGRAMMAR_DIR}/3rdparty/dlpack/include
                           ${INFLIGHT_XGRAMMAR_DIR}/3rdparty/picojson)
target_link_libraries(xgrammar PRIVATE Threads::Threads)

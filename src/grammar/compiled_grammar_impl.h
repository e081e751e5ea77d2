// What CompiledGrammar holds (src/grammar only): XGrammar's compiled grammar.
#pragma once

#include <xgrammar/xgrammar.h>

namespace inflight {

struct CompiledGrammarImpl {
  xgrammar::CompiledGrammar grammar;
};

}  // namespace inflight

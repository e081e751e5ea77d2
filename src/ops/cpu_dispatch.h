// INFLIGHT_CPU_CLONES: compiles a hot CPU kernel function twice, for baseline x86-64 and for
// x86-64-v3 (AVX2 + FMA), and lets the dynamic loader pick the version the CPU supports.
//
// The default build passes no -march flags (binaries must run on any machine); this recovers
// the wide vectors where they exist. Helpers the cloned function calls must be inlined into it
// (INFLIGHT_CPU_INLINE) to be compiled for the wider target too.
// NOTE: one process always runs one version, so results stay deterministic within a machine;
// different machines may differ in the last bits (FMA contraction).
#pragma once

#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__) && !defined(__clang__)
#define INFLIGHT_CPU_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define INFLIGHT_CPU_CLONES
#endif

#define INFLIGHT_CPU_INLINE __attribute__((always_inline)) inline

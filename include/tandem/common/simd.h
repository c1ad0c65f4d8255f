// Function multi-versioning for hot loops: a function marked TANDEM_VECTOR_CLONES is
// built twice, for plain x86-64 and for x86-64-v3 (AVX2 + FMA + F16C: Haswell, Zen and
// newer), and the right one is picked at load time. The binary stays portable.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TANDEM_VECTOR_CLONES __attribute__((target_clones("default", "arch=x86-64-v3")))
#else
#define TANDEM_VECTOR_CLONES
#endif

#pragma once
// The kernels `gpudx accept` runs, as PTX text the driver JIT-compiles (cuModuleLoadDataEx), so gpudx
// needs no CUDA toolkit to build or run. Written by hand for a low target (sm_52, PTX ISA 6.0) so
// every driver since CUDA 9 accepts it and JIT-compiles it for the card in hand (sm_90 on H200).
//
// Beside the PTX are the host versions of the same arithmetic: the host computes the answer a
// kernel must give and checks it, and the stand-in libcuda used by the tests runs them in place of
// the GPU. Keep both sides identical.
#include <bit>
#include <cmath>
#include <cstdint>

namespace gpudx::accept_kernels {

inline constexpr const char* kFill = "gpudx_fill";
inline constexpr const char* kVerify = "gpudx_verify";
inline constexpr const char* kCompute = "gpudx_compute";

// Pattern codes the kernels take (kind parameter).
inline constexpr uint32_t kWalkingOnes = 0;
inline constexpr uint32_t kAddress = 1;
inline constexpr uint32_t kWalkingZeros = 2;
inline constexpr uint32_t kRandom = 3;

// Word `index` (8-byte words, counted from the start of the tested region so that chunks differ) at
// device address `address`. The random pattern is splitmix64 of index and seed.
inline uint64_t pattern_word(uint32_t kind, uint64_t index, uint64_t address, uint64_t seed) {
    switch (kind) {
    case kAddress: return address;
    case kRandom: {
        uint64_t z = index + seed * 0x9E3779B97F4A7C15ull;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    case kWalkingZeros: return ~(1ull << ((index + seed) & 63));
    default: return 1ull << ((index + seed) & 63);
    }
}

// The value thread `gid` of gpudx_compute writes: an integer LCG and a float FMA chain, so both the
// integer and the floating-point units must be right. Exact: fma.rn.f32 is std::fmaf.
inline uint32_t compute_expected(uint32_t gid, uint32_t iterations) {
    uint32_t x = gid;
    float y = static_cast<float>(gid & 1023u) * 0.001f;
    for (uint32_t k = 0; k < iterations; ++k) {
        x = x * 1664525u + 1013904223u;
        y = std::fmaf(y, 0.999f, 0.25f);
    }
    return x ^ std::bit_cast<uint32_t>(y);
}

// compute_expected for many threads at host speed: the LCG after n steps is the affine map
// x -> A*x + C (mod 2^32), and the float chain depends only on gid & 1023.
class ComputeAnswer {
public:
    explicit ComputeAnswer(uint32_t iterations) {
        for (uint32_t k = 0; k < iterations; ++k) {
            a_ *= 1664525u;
            c_ = c_ * 1664525u + 1013904223u;
        }
        for (uint32_t i = 0; i < 1024; ++i) {
            float y = static_cast<float>(i) * 0.001f;
            for (uint32_t k = 0; k < iterations; ++k) y = std::fmaf(y, 0.999f, 0.25f);
            float_bits_[i] = std::bit_cast<uint32_t>(y);
        }
    }
    uint32_t value(uint32_t gid) const { return (a_ * gid + c_) ^ float_bits_[gid & 1023u]; }

private:
    uint32_t a_ = 1, c_ = 0;
    uint32_t float_bits_[1024];
};

inline constexpr unsigned kThreadsPerBlock = 256;
inline constexpr unsigned kComputeThreadsPerBlock = 128;
inline constexpr unsigned kMemoryBlocksPerSm = 8;
// Blocks per multiprocessor for the compute kernel: more than can be resident at once, so the first
// wave already occupies every multiprocessor of an idle GPU.
inline constexpr unsigned kComputeBlocksPerSm = 16;
inline constexpr uint32_t kComputeIterations = 4096;

// Parameters, in order:
//   gpudx_fill    (u64 ptr, u64 words, u32 kind, u64 seed, u64 index_base)
//   gpudx_verify  (u64 ptr, u64 words, u32 kind, u64 seed, u64 index_base, u64 errors*, u64 first_bad*)
//                 errors: atomically incremented per wrong word; first_bad: atomic min of its index
//   gpudx_compute (u64 values* (u32 each), u64 smids* (u32 per block), u32 iterations)
// Grid-stride loops: any grid size covers every word.
inline constexpr const char* kPtx = R"PTX(
.version 6.0
.target sm_52
.address_size 64

.visible .entry gpudx_fill(
    .param .u64 p_ptr,
    .param .u64 p_words,
    .param .u32 p_kind,
    .param .u64 p_seed,
    .param .u64 p_index_base
)
{
    .reg .pred %p<4>;
    .reg .b32 %r<10>;
    .reg .b64 %rd<20>;

    ld.param.u64 %rd1, [p_ptr];
    ld.param.u64 %rd2, [p_words];
    ld.param.u32 %r1, [p_kind];
    ld.param.u64 %rd3, [p_seed];
    ld.param.u64 %rd4, [p_index_base];
    cvta.to.global.u64 %rd19, %rd1;
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mov.u32 %r5, %nctaid.x;
    mul.wide.u32 %rd5, %r2, %r3;
    cvt.u64.u32 %rd6, %r4;
    add.u64 %rd5, %rd5, %rd6;
    mul.wide.u32 %rd7, %r5, %r3;
    setp.ge.u64 %p1, %rd5, %rd2;
    @%p1 bra FILL_DONE;
FILL_LOOP:
    add.u64 %rd8, %rd4, %rd5;
    shl.b64 %rd9, %rd5, 3;
    add.u64 %rd11, %rd1, %rd9;
    add.u64 %rd12, %rd19, %rd9;
    setp.eq.u32 %p2, %r1, 1;
    @%p2 bra FILL_ADDR;
    setp.eq.u32 %p2, %r1, 3;
    @%p2 bra FILL_RANDOM;
    add.u64 %rd13, %rd8, %rd3;
    cvt.u32.u64 %r6, %rd13;
    and.b32 %r6, %r6, 63;
    mov.u64 %rd14, 1;
    shl.b64 %rd10, %rd14, %r6;
    setp.eq.u32 %p2, %r1, 2;
    @%p2 not.b64 %rd10, %rd10;
    bra.uni FILL_STORE;
FILL_ADDR:
    mov.u64 %rd10, %rd11;
    bra.uni FILL_STORE;
FILL_RANDOM:
    mad.lo.u64 %rd13, %rd3, 0x9E3779B97F4A7C15U, %rd8;
    shr.u64 %rd14, %rd13, 30;
    xor.b64 %rd13, %rd13, %rd14;
    mul.lo.u64 %rd13, %rd13, 0xBF58476D1CE4E5B9U;
    shr.u64 %rd14, %rd13, 27;
    xor.b64 %rd13, %rd13, %rd14;
    mul.lo.u64 %rd13, %rd13, 0x94D049BB133111EBU;
    shr.u64 %rd14, %rd13, 31;
    xor.b64 %rd10, %rd13, %rd14;
FILL_STORE:
    st.global.u64 [%rd12], %rd10;
    add.u64 %rd5, %rd5, %rd7;
    setp.lt.u64 %p1, %rd5, %rd2;
    @%p1 bra FILL_LOOP;
FILL_DONE:
    ret;
}

.visible .entry gpudx_verify(
    .param .u64 p_ptr,
    .param .u64 p_words,
    .param .u32 p_kind,
    .param .u64 p_seed,
    .param .u64 p_index_base,
    .param .u64 p_errors,
    .param .u64 p_first_bad
)
{
    .reg .pred %p<4>;
    .reg .b32 %r<10>;
    .reg .b64 %rd<24>;

    ld.param.u64 %rd1, [p_ptr];
    ld.param.u64 %rd2, [p_words];
    ld.param.u32 %r1, [p_kind];
    ld.param.u64 %rd3, [p_seed];
    ld.param.u64 %rd4, [p_index_base];
    ld.param.u64 %rd20, [p_errors];
    ld.param.u64 %rd21, [p_first_bad];
    cvta.to.global.u64 %rd19, %rd1;
    cvta.to.global.u64 %rd20, %rd20;
    cvta.to.global.u64 %rd21, %rd21;
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mov.u32 %r5, %nctaid.x;
    mul.wide.u32 %rd5, %r2, %r3;
    cvt.u64.u32 %rd6, %r4;
    add.u64 %rd5, %rd5, %rd6;
    mul.wide.u32 %rd7, %r5, %r3;
    setp.ge.u64 %p1, %rd5, %rd2;
    @%p1 bra VERIFY_DONE;
VERIFY_LOOP:
    add.u64 %rd8, %rd4, %rd5;
    shl.b64 %rd9, %rd5, 3;
    add.u64 %rd11, %rd1, %rd9;
    add.u64 %rd12, %rd19, %rd9;
    ld.global.u64 %rd15, [%rd12];
    setp.eq.u32 %p2, %r1, 1;
    @%p2 bra VERIFY_ADDR;
    setp.eq.u32 %p2, %r1, 3;
    @%p2 bra VERIFY_RANDOM;
    add.u64 %rd13, %rd8, %rd3;
    cvt.u32.u64 %r6, %rd13;
    and.b32 %r6, %r6, 63;
    mov.u64 %rd14, 1;
    shl.b64 %rd10, %rd14, %r6;
    setp.eq.u32 %p2, %r1, 2;
    @%p2 not.b64 %rd10, %rd10;
    bra.uni VERIFY_CHECK;
VERIFY_ADDR:
    mov.u64 %rd10, %rd11;
    bra.uni VERIFY_CHECK;
VERIFY_RANDOM:
    mad.lo.u64 %rd13, %rd3, 0x9E3779B97F4A7C15U, %rd8;
    shr.u64 %rd14, %rd13, 30;
    xor.b64 %rd13, %rd13, %rd14;
    mul.lo.u64 %rd13, %rd13, 0xBF58476D1CE4E5B9U;
    shr.u64 %rd14, %rd13, 27;
    xor.b64 %rd13, %rd13, %rd14;
    mul.lo.u64 %rd13, %rd13, 0x94D049BB133111EBU;
    shr.u64 %rd14, %rd13, 31;
    xor.b64 %rd10, %rd13, %rd14;
VERIFY_CHECK:
    setp.eq.u64 %p3, %rd15, %rd10;
    @%p3 bra VERIFY_NEXT;
    atom.global.add.u64 %rd16, [%rd20], 1;
    atom.global.min.u64 %rd17, [%rd21], %rd8;
VERIFY_NEXT:
    add.u64 %rd5, %rd5, %rd7;
    setp.lt.u64 %p1, %rd5, %rd2;
    @%p1 bra VERIFY_LOOP;
VERIFY_DONE:
    ret;
}

.visible .entry gpudx_compute(
    .param .u64 p_values,
    .param .u64 p_smids,
    .param .u32 p_iterations
)
{
    .reg .pred %p<3>;
    .reg .b32 %r<16>;
    .reg .f32 %f<4>;
    .reg .b64 %rd<8>;

    ld.param.u64 %rd1, [p_values];
    ld.param.u64 %rd2, [p_smids];
    ld.param.u32 %r1, [p_iterations];
    cvta.to.global.u64 %rd1, %rd1;
    cvta.to.global.u64 %rd2, %rd2;
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.u32 %r5, %r2, %r3, %r4;
    mov.u32 %r6, %r5;
    and.b32 %r7, %r5, 1023;
    cvt.rn.f32.u32 %f1, %r7;
    mul.rn.f32 %f1, %f1, 0f3A83126F;
    mov.u32 %r8, 0;
    setp.eq.u32 %p1, %r1, 0;
    @%p1 bra COMPUTE_STORE;
COMPUTE_LOOP:
    mad.lo.u32 %r6, %r6, 1664525, 1013904223;
    fma.rn.f32 %f1, %f1, 0f3F7FBE77, 0f3E800000;
    add.u32 %r8, %r8, 1;
    setp.lt.u32 %p1, %r8, %r1;
    @%p1 bra COMPUTE_LOOP;
COMPUTE_STORE:
    mov.b32 %r9, %f1;
    xor.b32 %r10, %r6, %r9;
    mul.wide.u32 %rd3, %r5, 4;
    add.u64 %rd4, %rd1, %rd3;
    st.global.u32 [%rd4], %r10;
    setp.ne.u32 %p2, %r4, 0;
    @%p2 bra COMPUTE_END;
    mov.u32 %r11, %smid;
    mul.wide.u32 %rd5, %r2, 4;
    add.u64 %rd6, %rd2, %rd5;
    st.global.u32 [%rd6], %r11;
COMPUTE_END:
    ret;
}
)PTX";

}  // namespace gpudx::accept_kernels

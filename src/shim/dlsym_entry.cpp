// The shim's exported `dlsym`.
//
// glibc's dlsym finds out who called it from its return address: RTLD_NEXT means "the next object after
// the caller", RTLD_DEFAULT searches the caller's scope. A C wrapper that calls the real dlsym would make
// the shim the caller, so a sanitizer runtime or another interposer asking for RTLD_NEXT would be handed
// its own symbol back and recurse forever. So the entry point is a few instructions of assembly: the two
// pseudo-handles tail-jump into the real dlsym with the caller's return address untouched, and only
// lookups on a real handle (how the CUDA runtime and NCCL find cuGetProcAddress and NVML) reach C code.
#include <dlfcn.h>

#include "shim/shim_internal.hpp"

#if defined(__x86_64__)
asm(R"(
    .text
    .globl dlsym
    .type dlsym, @function
    .p2align 4
dlsym:
    .cfi_startproc
    cmpq $-1, %rdi
    je 1f
    testq %rdi, %rdi
    je 1f
    jmp gpudx_shim_dlsym_handle
1:
    movq gpudx_shim_real_dlsym(%rip), %rax
    testq %rax, %rax
    je 2f
    jmp *%rax
2:
    pushq %rdi
    .cfi_adjust_cfa_offset 8
    pushq %rsi
    .cfi_adjust_cfa_offset 8
    subq $8, %rsp
    .cfi_adjust_cfa_offset 8
    call gpudx_shim_resolve_real_dlsym
    addq $8, %rsp
    .cfi_adjust_cfa_offset -8
    popq %rsi
    .cfi_adjust_cfa_offset -8
    popq %rdi
    .cfi_adjust_cfa_offset -8
    testq %rax, %rax
    je 3f
    jmp *%rax
3:
    ret
    .cfi_endproc
    .size dlsym, .-dlsym
)");
#else
// Other architectures: without a tail call the caller's identity is lost for RTLD_NEXT / RTLD_DEFAULT, so
// those are answered relative to the shim. Acceptable only because the shim comes first in the search
// order; x86-64 is the supported target.
extern "C" __attribute__((visibility("default"))) void* dlsym(void* handle, const char* name) {
    if (handle != RTLD_NEXT && handle != RTLD_DEFAULT) return gpudx_shim_dlsym_handle(handle, name);
    auto real = reinterpret_cast<void* (*)(void*, const char*)>(gpudx_shim_resolve_real_dlsym());
    return real ? real(handle, name) : nullptr;
}
#endif

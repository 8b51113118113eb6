#pragma once
// Declarations shared by the shim's translation units. Everything here has hidden visibility: the only
// symbols the shim exports are the interposed entry points (see shim.cpp and dlsym_entry.cpp).

extern "C" {
// The C library's dlsym, found with dlvsym; read by the assembly entry point, so it has C linkage and is a
// plain pointer accessed with __atomic builtins (a sanitizer runtime may call dlsym before it is ready to
// see instrumented code, so nothing on that path may be a function call it instruments).
extern void* gpudx_shim_real_dlsym;
// Resolves (once) and returns the C library's dlsym. Safe before any constructor has run.
void* gpudx_shim_resolve_real_dlsym();
// dlsym for a concrete handle (not RTLD_NEXT / RTLD_DEFAULT, which never reach C code).
void* gpudx_shim_dlsym_handle(void* handle, const char* name);
}

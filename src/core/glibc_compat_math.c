// The portable build's stand-ins for exp, exp2, log, log2 and pow at their glibc 2.2.5 versions (docs/release.md),
// linked only into what links the static SQLite (CMakeLists.txt's gpudx_sqlite3), whose math functions call
// them: a file of its own, so a library that never calls them (the shim) never needs libm.
#define GPUDX_COMPAT __attribute__((visibility("hidden")))

// glibc 2.29 gave exp, exp2, log, log2 and pow new versions (faster, without the old SVID error handling),
// called by the static SQLite of the agent's event store (its math functions). The 2.2.5 versions every
// glibc still has compute the same values; the portable link turns each call into its __wrap_ (--wrap,
// CMakeLists.txt), which calls the old version.
double gpudx_old_exp(double);
double gpudx_old_exp2(double);
double gpudx_old_log(double);
double gpudx_old_log2(double);
double gpudx_old_pow(double, double);
__asm__(".symver gpudx_old_exp,exp@GLIBC_2.2.5");
__asm__(".symver gpudx_old_exp2,exp2@GLIBC_2.2.5");
__asm__(".symver gpudx_old_log,log@GLIBC_2.2.5");
__asm__(".symver gpudx_old_log2,log2@GLIBC_2.2.5");
__asm__(".symver gpudx_old_pow,pow@GLIBC_2.2.5");
GPUDX_COMPAT double __wrap_exp(double x) { return gpudx_old_exp(x); }
GPUDX_COMPAT double __wrap_exp2(double x) { return gpudx_old_exp2(x); }
GPUDX_COMPAT double __wrap_log(double x) { return gpudx_old_log(x); }
GPUDX_COMPAT double __wrap_log2(double x) { return gpudx_old_log2(x); }
GPUDX_COMPAT double __wrap_pow(double x, double y) { return gpudx_old_pow(x, y); }

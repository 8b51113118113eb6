# What the portable build (cmake/PortableToolchain.cmake, docs/release.md) adds to every binary and shared
# library it links: libstdc++ and libgcc statically, and src/core/glibc_compat.c's stand-ins for the symbols
# they would take from a glibc newer than 2.28. Tests are linked the same way, so the suite runs the very
# code the release ships.
add_library(gpudx_glibc_compat STATIC ${PROJECT_SOURCE_DIR}/src/core/glibc_compat.c)
set_target_properties(gpudx_glibc_compat PROPERTIES C_VISIBILITY_PRESET hidden)
target_compile_options(gpudx_glibc_compat PRIVATE ${GPUDX_WARNINGS})
# The stand-ins call the timed waits, which glibc 2.31 keeps in libpthread.
find_package(Threads REQUIRED)
target_link_libraries(gpudx_glibc_compat PUBLIC Threads::Threads)
# The references come from libstdc++.a and libgcc_eh.a, which the linker reads after every library named
# here, so no archive member would be pulled in for them: each symbol is made undefined from the start (-u),
# which pulls the member in wherever the archive appears (more than once is harmless, unlike a whole archive).
link_libraries(gpudx_glibc_compat)
foreach(symbol __libc_single_threaded arc4random _dl_find_object pthread_cond_clockwait pthread_mutex_clocklock
               pthread_rwlock_clockrdlock pthread_rwlock_clockwrlock)
  add_link_options(LINKER:-u,${symbol})
endforeach()
add_link_options(-static-libstdc++ -static-libgcc)

# exp, exp2, log, log2 and pow bind to their glibc 2.29 versions when linked against 2.31: in what links the
# static SQLite, each call goes to glibc_compat_math.c's __wrap_ of it instead, which calls the 2.2.5 version
# (CMakeLists.txt's gpudx_sqlite3 adds the library and the --wrap options).
add_library(gpudx_glibc_compat_math STATIC ${PROJECT_SOURCE_DIR}/src/core/glibc_compat_math.c)
set_target_properties(gpudx_glibc_compat_math PROPERTIES C_VISIBILITY_PRESET hidden)
target_compile_options(gpudx_glibc_compat_math PRIVATE ${GPUDX_WARNINGS})
target_link_libraries(gpudx_glibc_compat_math PUBLIC m)

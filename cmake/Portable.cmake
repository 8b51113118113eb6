# What the portable build (cmake/PortableToolchain.cmake, docs/release.md) adds to every binary and shared
# library it links: libstdc++ and libgcc statically, and src/core/glibc_compat.c's stand-ins for the symbols
# they would take from a glibc newer than 2.28. Tests are linked the same way, so the suite runs the very
# code the release ships.
add_library(gpudx_glibc_compat STATIC ${PROJECT_SOURCE_DIR}/src/core/glibc_compat.c)
set_target_properties(gpudx_glibc_compat PROPERTIES C_VISIBILITY_PRESET hidden)
target_compile_options(gpudx_glibc_compat PRIVATE ${GPUDX_WARNINGS})
# Whole: the references come from libstdc++.a and libgcc_eh.a, which the linker reads after every library
# named here, so an archive member would never be pulled in for them.
link_libraries("$<LINK_LIBRARY:WHOLE_ARCHIVE,gpudx_glibc_compat>")
add_link_options(-static-libstdc++ -static-libgcc)

# The portable build (docs/release.md): the host's gcc 12 compiles against Debian 11's glibc 2.31 headers and
# links against its libraries (a sysroot made by scripts/fetch-sysroot.sh), with libstdc++ and libgcc static
# and cmake/Portable.cmake's fallbacks for the few symbols they would otherwise take from a newer glibc. The
# binaries then load on glibc 2.28 and newer. `make` configures this way:
#
#   cmake -S . -B build -DCMAKE_TOOLCHAIN_FILE=cmake/PortableToolchain.cmake -DGPUDX_SYSROOT=build/sysroot
#
# Only the compiler's own headers (libstdc++) come from the host; every other header a target may include is
# reached through folders made here, never through the host's /usr/include, whose glibc headers would undo
# the sysroot.
if(NOT GPUDX_SYSROOT)
  message(FATAL_ERROR "PortableToolchain.cmake needs -DGPUDX_SYSROOT=DIR (scripts/fetch-sysroot.sh DIR makes it)")
endif()
get_filename_component(GPUDX_SYSROOT "${GPUDX_SYSROOT}" ABSOLUTE)
if(NOT EXISTS "${GPUDX_SYSROOT}/.gpudx-sysroot")
  message(FATAL_ERROR "${GPUDX_SYSROOT} is not a sysroot made by scripts/fetch-sysroot.sh")
endif()
set(CMAKE_SYSROOT "${GPUDX_SYSROOT}")
# gcc searches its own relative library folders (/usr/lib/gcc/x86_64-linux-gnu/12/../../../x86_64-linux-gnu,
# the host's crt1.o and libc.so) before the sysroot's: the sysroot's come first, named explicitly, and the
# libraries' own dependencies (libpthread's on libc) resolve there too.
set(lib "${GPUDX_SYSROOT}/usr/lib/x86_64-linux-gnu")
set(slib "${GPUDX_SYSROOT}/lib/x86_64-linux-gnu")
foreach(kind EXE SHARED MODULE)
  set(CMAKE_${kind}_LINKER_FLAGS_INIT "-B${lib} -L${lib} -L${slib} -Wl,-rpath-link=${slib}")
endforeach()
# try_compile projects read this file again and need the same sysroot.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES GPUDX_SYSROOT)

# The header-only libraries, each by its own folder of the host's /usr/include (and SQLite's one header) (CMakeLists.txt's
# GPUDX_HEADERS_DIR), and GoogleTest built from the host's sources (tests/CMakeLists.txt's GPUDX_GTEST_SOURCE).
if(CMAKE_BINARY_DIR AND NOT CMAKE_BINARY_DIR MATCHES "/CMakeFiles/CMakeScratch/|/CMakeFiles/CMakeTmp")
  set(headers "${CMAKE_BINARY_DIR}/portable-headers")
  foreach(lib nlohmann CLI fmt toml++ sqlite3.h)
    if(NOT EXISTS "${headers}/${lib}")
      file(MAKE_DIRECTORY "${headers}")
      file(CREATE_LINK "/usr/include/${lib}" "${headers}/${lib}" SYMBOLIC)
    endif()
  endforeach()
  set(GPUDX_HEADERS_DIR "${headers}" CACHE PATH "")
  set(GPUDX_GTEST_SOURCE /usr/src/googletest CACHE PATH "")
  # Its install rules would put GoogleTest into gpudx's packages.
  set(INSTALL_GTEST OFF CACHE BOOL "")
endif()
# Google Benchmark exists only as the host's build, made against the host's glibc: the portable build leaves
# bench_kernel_log out (`make PORTABLE=0 BUILD=build-native bench` has it).
set(CMAKE_DISABLE_FIND_PACKAGE_benchmark ON)

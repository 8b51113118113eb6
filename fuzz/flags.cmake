# Compiler flags of the fuzz configure (-DGPUDX_FUZZ=ON), included by the top-level CMakeLists.txt before any
# target so that libgpudx itself is instrumented: libFuzzer needs coverage of the parsers, not of the harness.
if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "GPUDX_FUZZ needs clang (g++ has no libFuzzer): -DCMAKE_CXX_COMPILER=clang++-16 "
                      "-DCMAKE_C_COMPILER=clang-16, or run fuzz/run.sh")
endif()

# Workaround, clang 16 (and 14) with libstdc++ 12: libstdc++ declares std::expected only when __cpp_concepts
# >= 202002L (P0848R3, conditionally trivial special members). Clang 16 implements P0848R3 but still reports
# 201907L, so <expected> comes out empty. Raising the macro is safe for this compiler; clang 19 reports
# 202002L itself, so the override stops there.
if(CMAKE_CXX_COMPILER_VERSION VERSION_LESS 19)
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-D__cpp_concepts=202002L>
                      $<$<COMPILE_LANGUAGE:CXX>:-Wno-builtin-macro-redefined>
                      $<$<COMPILE_LANGUAGE:CXX>:-Wno-macro-redefined>)
endif()

add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
                    -fno-omit-frame-pointer -gline-tables-only)
add_link_options(-fsanitize=address,undefined)

# The built-in catalogues (data/xid-policy.toml, data/signatures.toml, data/error-codes/*.toml) compiled at build
# time, so that no run of gpudx parses them (rules/reference/catalogue_blob.hpp), with the kernel-log prefilter
# for the words they make the scanner look for (collect/kernel_log/prefilter_image.hpp). A host tool built first,
# gpudx_compile_catalogues, reads them with gpudx's own loaders (a catalogue gpudx would refuse fails the build,
# with its FILE:LINE) and writes what they returned as generated/rules/reference/catalogue_blob_data.cpp, compiled
# into gpudx_catalogue_data. The tool is built like every other binary of the build (the portable build's sysroot
# binaries run on the build host, as the tests do).
#
# gpudx_rules reads the blob through builtin_catalogue_blob() and gpudx_collect the prefilter through
# builtin_prefilter_image(), which the generated file defines: every program that links either gets
# gpudx_catalogue_data after it, except the tool itself (target property
# GPUDX_CATALOGUE_COMPILER), which links the rules to compile the catalogues and defines an empty blob of its own.

set(GPUDX_CATALOGUE_FILES
    data/xid-policy.toml
    data/signatures.toml
    # The GPU libraries' result codes (rules/reference/result_codes.hpp), in the order of their tables.
    data/error-codes/cuda-driver.toml
    data/error-codes/cuda-runtime.toml
    data/error-codes/nvml.toml
    data/error-codes/nccl.toml
    data/error-codes/hip.toml
    data/error-codes/hsa.toml)
list(TRANSFORM GPUDX_CATALOGUE_FILES PREPEND ${PROJECT_SOURCE_DIR}/ OUTPUT_VARIABLE catalogue_paths)

add_executable(gpudx_compile_catalogues ${PROJECT_SOURCE_DIR}/tools/compile_catalogues.cpp)
target_compile_options(gpudx_compile_catalogues PRIVATE ${GPUDX_WARNINGS})
target_link_libraries(gpudx_compile_catalogues PRIVATE gpudx_rules gpudx_collect)
set_target_properties(gpudx_compile_catalogues PROPERTIES GPUDX_CATALOGUE_COMPILER ON)

set(catalogue_blob ${CMAKE_BINARY_DIR}/generated/rules/reference/catalogue_blob_data.cpp)
add_custom_command(OUTPUT ${catalogue_blob}
  COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/generated/rules/reference
  COMMAND gpudx_compile_catalogues ${catalogue_blob} ${catalogue_paths}
  DEPENDS gpudx_compile_catalogues ${catalogue_paths}
  COMMENT "Compiling the built-in catalogues (data/*.toml)"
  VERBATIM)
add_library(gpudx_catalogue_data STATIC ${catalogue_blob})
foreach(layer gpudx_rules gpudx_collect)
  target_link_libraries(${layer} INTERFACE
                        "$<$<NOT:$<BOOL:$<TARGET_PROPERTY:GPUDX_CATALOGUE_COMPILER>>>:gpudx_catalogue_data>")
endforeach()

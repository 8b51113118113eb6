# The layers of src/, declared once in the top-level CMakeLists.txt with gpudx_layer() (docs/architecture.md).
#
#   gpudx_layer(NAME [HEADER_ONLY | CHECK_ONLY] [DEPS LAYER...])
#
# makes src/NAME/*.cpp the static library gpudx_NAME, linked to the layers in DEPS and nothing else
# (HEADER_ONLY: an interface library; CHECK_ONLY: the folder is built elsewhere, as the shim and the binary
# are, and only its includes are checked). gpudx_check_layers() then writes the graph and adds the target
# gpudx_layering, which every layer's build waits for: it runs cmake/CheckLayers.cmake over every file of src/
# and fails the build when a file includes a file of a layer its own layer does not name (however the include
# is spelled: quotes or angle brackets, through .. or not).

set(GPUDX_LAYER_GRAPH ${CMAKE_BINARY_DIR}/gpudx-layers.txt)
set(GPUDX_LAYER_STAMP ${CMAKE_BINARY_DIR}/gpudx-layers.checked)

function(gpudx_layer name)
  cmake_parse_arguments(L "HEADER_ONLY;CHECK_ONLY" "" "DEPS" ${ARGN})
  foreach(dep IN LISTS L_DEPS)
    get_property(known GLOBAL PROPERTY GPUDX_LAYERS)
    if(NOT dep IN_LIST known)
      message(FATAL_ERROR "gpudx_layer(${name}): ${dep} is not a layer declared before it (layers go bottom up)")
    endif()
  endforeach()
  set_property(GLOBAL APPEND PROPERTY GPUDX_LAYERS ${name})
  set_property(GLOBAL PROPERTY GPUDX_LAYER_DEPS_${name} "${L_DEPS}")
  if(L_CHECK_ONLY)
    return()
  endif()
  set(target gpudx_${name})
  if(L_HEADER_ONLY)
    add_library(${target} INTERFACE)
    target_include_directories(${target} INTERFACE ${PROJECT_SOURCE_DIR}/src)
    return()
  endif()
  file(GLOB_RECURSE sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/${name}/*.cpp)
  add_library(${target} STATIC ${sources})
  target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_compile_options(${target} PRIVATE ${GPUDX_WARNINGS})
  target_link_libraries(${target} PUBLIC gpudx_third_party)
  foreach(dep IN LISTS L_DEPS)
    target_link_libraries(${target} PUBLIC gpudx_${dep})
  endforeach()
  add_dependencies(${target} gpudx_layering)
  # One precompiled header for every layer (the same flags everywhere), built once with core. Not with ccache:
  # ccache cannot use gcc's precompiled header ("Could not use precompiled header": every compile misses), and
  # a warm cache saves more than the header does (GPUDX_PCH=OFF by default then).
  if(GPUDX_PCH)
    if(name STREQUAL "core")
      target_precompile_headers(${target} PRIVATE <nlohmann/json.hpp> <string> <vector> <optional> <expected>)
    else()
      target_precompile_headers(${target} REUSE_FROM gpudx_core)
    endif()
  endif()
endfunction()

function(gpudx_check_layers)
  get_property(layers GLOBAL PROPERTY GPUDX_LAYERS)
  set(graph "")
  foreach(layer IN LISTS layers)
    get_property(deps GLOBAL PROPERTY GPUDX_LAYER_DEPS_${layer})
    list(JOIN deps " " deps)
    string(APPEND graph "${layer}: ${deps}\n")
  endforeach()
  file(WRITE ${GPUDX_LAYER_GRAPH}.new "${graph}")
  file(COPY_FILE ${GPUDX_LAYER_GRAPH}.new ${GPUDX_LAYER_GRAPH} ONLY_IF_DIFFERENT)
  # Every file of src/, whatever its extension: the check reads them all (a .inc includes too).
  file(GLOB_RECURSE files CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/*)
  add_custom_command(OUTPUT ${GPUDX_LAYER_STAMP}
    COMMAND ${CMAKE_COMMAND} -DSRC=${PROJECT_SOURCE_DIR}/src -DGRAPH=${GPUDX_LAYER_GRAPH}
            -DSTAMP=${GPUDX_LAYER_STAMP} -P ${PROJECT_SOURCE_DIR}/cmake/CheckLayers.cmake
    DEPENDS ${files} ${GPUDX_LAYER_GRAPH} ${PROJECT_SOURCE_DIR}/cmake/CheckLayers.cmake
    COMMENT "Checking that every include in src/ follows the layers"
    VERBATIM)
  add_custom_target(gpudx_layering DEPENDS ${GPUDX_LAYER_STAMP})
endfunction()

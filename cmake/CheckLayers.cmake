# cmake -DSRC=src -DGRAPH=gpudx-layers.txt [-DSTAMP=file] -P CheckLayers.cmake
#
# Fails when a file in src/LAYER/ includes a file of src/OTHER/ where OTHER is neither LAYER nor one of the
# layers LAYER names in GRAPH (one line per layer: "layer: dep dep ..."). A layer is the first folder under
# src/ (src/rules/engine/x.cpp is in rules). Only direct includes count: a rule that needs something from a
# layer two below names that layer too, so every edge is visible in CMakeLists.txt.
#
# Every file of src/ is read, whatever its extension (a .inc is compiled as part of its includer, with its own
# folder as the base of its quoted includes), and every include is resolved as the compiler resolves it, since
# every layer compiles with -I src: "x" against the including file's folder first, then src/; <x> against
# src/ (before the system's folders, where nothing of gpudx lives). So <agent/x.hpp>, "../agent/x.hpp" and
# "core/../agent/x.hpp" are each an include of agent/. An include that names no file there (a system or
# third-party header, or a file the build generates) is judged by its spelling against src/, which is all a
# generated header of a layer can be judged by.
#
# Also fails on an include of toml++ anywhere but src/core/toml.hpp, which works around a toml++ 3.3 bug
# that a direct include would bring back. tests/layers/ feeds this script one violation of each kind.
cmake_minimum_required(VERSION 3.25)
if(NOT SRC OR NOT GRAPH)
  message(FATAL_ERROR "usage: cmake -DSRC=DIR -DGRAPH=FILE [-DSTAMP=FILE] -P CheckLayers.cmake")
endif()
cmake_path(ABSOLUTE_PATH SRC NORMALIZE)
file(STRINGS ${GRAPH} lines)
set(layers "")
foreach(line IN LISTS lines)
  if(line MATCHES "^([a-z_]+):(.*)$")
    set(layer ${CMAKE_MATCH_1})
    string(STRIP "${CMAKE_MATCH_2}" deps)
    separate_arguments(deps UNIX_COMMAND "${deps}")
    set(allowed_${layer} ${deps})
    list(APPEND layers ${layer})
  endif()
endforeach()

# layer_of(OUT PATH): the layer of the normalized absolute PATH, or "" when PATH lies outside src/ or names
# no declared layer's folder.
function(layer_of out path)
  set(${out} "" PARENT_SCOPE)
  cmake_path(IS_PREFIX SRC "${path}" NORMALIZE inside)
  if(NOT inside)
    return()
  endif()
  cmake_path(RELATIVE_PATH path BASE_DIRECTORY "${SRC}" OUTPUT_VARIABLE rel)
  if(rel MATCHES "^([^/]+)/." AND CMAKE_MATCH_1 IN_LIST layers)
    set(${out} ${CMAKE_MATCH_1} PARENT_SCOPE)
  endif()
endfunction()

# resolve(OUT FILE_DIR KIND NAME): the absolute path the compiler opens for #include KIND NAME KIND in a file of
# FILE_DIR, or, when no such file exists, the spelling taken against src/.
function(resolve out file_dir kind name)
  set(candidates "")
  if(kind STREQUAL "\"")
    list(APPEND candidates "${file_dir}/${name}")
  endif()
  list(APPEND candidates "${SRC}/${name}")
  foreach(candidate IN LISTS candidates)
    cmake_path(NORMAL_PATH candidate)
    if(EXISTS "${candidate}" AND NOT IS_DIRECTORY "${candidate}")
      set(${out} "${candidate}" PARENT_SCOPE)
      return()
    endif()
  endforeach()
  set(${out} "${candidate}" PARENT_SCOPE)
endfunction()

set(include_regex "^[ \t]*#[ \t]*include(_next)?[ \t]*([<\"])([^>\"]+)[>\"]")
set(problems "")
file(GLOB_RECURSE files RELATIVE ${SRC} ${SRC}/*)
list(SORT files)
foreach(file IN LISTS files)
  string(REGEX MATCH "^[^/]+" layer "${file}")
  if(NOT layer IN_LIST layers)
    string(APPEND problems "  src/${file}: folder src/${layer}/ is not a declared layer (gpudx_layer in CMakeLists.txt)\n")
    continue()
  endif()
  cmake_path(GET file PARENT_PATH file_dir)
  set(file_dir "${SRC}/${file_dir}")
  list(JOIN allowed_${layer} ", " may)
  if(may)
    set(may "${layer}/ and: ${may}")
  else()
    set(may "${layer}/ alone")
  endif()
  file(STRINGS ${SRC}/${file} includes REGEX "${include_regex}" ENCODING UTF-8)
  foreach(inc IN LISTS includes)
    string(REGEX MATCH "${include_regex}" inc "${inc}")
    string(STRIP "${inc}" inc)
    set(kind "${CMAKE_MATCH_2}")
    set(name "${CMAKE_MATCH_3}")
    if(name MATCHES "^toml\\+\\+/" AND NOT file STREQUAL "core/toml.hpp")
      string(APPEND problems "  src/${file}: ${inc}: include \"core/toml.hpp\" instead (it mends toml++ 3.3's whitespace table)\n")
      continue()
    endif()
    resolve(target "${file_dir}" "${kind}" "${name}")
    layer_of(used "${target}")
    if(NOT used OR used STREQUAL layer OR used IN_LIST allowed_${layer})
      continue()
    endif()
    cmake_path(RELATIVE_PATH target BASE_DIRECTORY "${SRC}" OUTPUT_VARIABLE shown)
    if(NOT shown STREQUAL name)
      set(inc "${inc} (src/${shown})")
    endif()
    string(APPEND problems "  src/${file}: ${inc}: layer ${layer} may include only ${may}\n")
  endforeach()
endforeach()

if(problems)
  message(FATAL_ERROR "gpudx: includes that break the layering (docs/architecture.md):\n${problems}")
endif()
if(STAMP)
  file(TOUCH ${STAMP})
endif()

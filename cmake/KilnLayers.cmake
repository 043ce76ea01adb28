# The layers point one way: the runtime and the cache load and run artifacts
# and never link the compiler (no MLIR, no passes, no dialects), so a training
# worker carries none of it and a change to the compiler cannot break them
# through a back door. kiln_check_layers() walks each of their libraries'
# link closures at configure time and stops with the path that breaks the
# rule. A session that may compile on a miss is handed a compile function by
# whoever opens it (the Python bindings, the CLI).

set(KILN_RUNTIME_LIBRARIES KilnArtifact KilnCache KilnComm KilnNpz KilnSession
  KilnSim)
set(KILN_COMPILER_LIBRARIES KilnCompiler KilnGraphPasses KilnTilePasses
  KilnEnginePasses KilnEmit KilnReference KilnGraphConversion KilnDialects
  KilnKGraph KilnKTile KilnKisa MLIR)
# Their tests build graphs and artifacts to feed them (the graph builder, the
# artifact emitter, hence MLIR and the dialects), but compile nothing.
set(KILN_RUNTIME_TESTS kiln-runtime-tests)
set(KILN_PIPELINE_LIBRARIES KilnCompiler KilnGraphPasses KilnTilePasses
  KilnEnginePasses KilnReference)

# Sets `out_var` to the chain of targets from `target` to one of
# `forbidden`, if there is one.
function(kiln_find_link target forbidden chain out_var)
  if(target IN_LIST forbidden)
    set(${out_var} "${chain};${target}" PARENT_SCOPE)
    return()
  endif()
  if(NOT TARGET ${target})
    set(${out_var} "" PARENT_SCOPE)
    return()
  endif()
  get_target_property(type ${target} TYPE)
  set(links "")
  if(NOT type STREQUAL "INTERFACE_LIBRARY")
    get_target_property(direct ${target} LINK_LIBRARIES)
    list(APPEND links ${direct})
  endif()
  get_target_property(interface ${target} INTERFACE_LINK_LIBRARIES)
  list(APPEND links ${interface})
  foreach(link IN LISTS links)
    string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" link "${link}")
    if(NOT link OR link MATCHES "NOTFOUND$" OR link IN_LIST chain)
      continue()
    endif()
    kiln_find_link(${link} "${forbidden}" "${chain};${target}" found)
    if(found)
      set(${out_var} "${found}" PARENT_SCOPE)
      return()
    endif()
  endforeach()
  set(${out_var} "" PARENT_SCOPE)
endfunction()

function(kiln_check_layers)
  foreach(check "RUNTIME_LIBRARIES;COMPILER_LIBRARIES"
                "RUNTIME_TESTS;PIPELINE_LIBRARIES")
    list(GET check 0 users)
    list(GET check 1 banned)
    foreach(target IN LISTS KILN_${users})
      kiln_find_link(${target} "${KILN_${banned}}" "" found)
      if(found)
        list(REMOVE_ITEM found "")
        string(REPLACE ";" " -> " path "${found}")
        message(FATAL_ERROR "layering: ${target} links the compiler (${path}); "
          "runtime/ and cache/ take a compile function instead "
          "(cmake/KilnLayers.cmake)")
      endif()
    endforeach()
  endforeach()
endfunction()

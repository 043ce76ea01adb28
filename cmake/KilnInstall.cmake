# What `cmake --install` puts where, and the .deb CPack builds from it.
#
#   <prefix>/bin/kiln, kiln-opt       the compiler, cache and precompile CLI
#   <prefix>/lib/python3/dist-packages/kiln
#                                     the PyTorch front end and runtime
#                                     bindings, where Debian's python3 finds
#                                     packages under /usr (another prefix
#                                     needs PYTHONPATH)
#   <prefix>/share/doc/kiln           the user guides
#   <prefix>/include/kiln, lib/kiln, lib/cmake/Kiln
#                                     the C++ trainer API (component `dev`,
#                                     the kiln-dev package): headers, Kiln's
#                                     static libraries, find_package(Kiln)
#
# The tools and the extension module link Kiln's own libraries statically
# and Debian's shared ones (MLIR, LLVM, protobuf, Gloo, oneDNN, SQLite,
# libzip, OpenSSL): the package depends on those.

include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
set(CMAKE_INSTALL_DEFAULT_COMPONENT_NAME kiln)

set(KILN_PYTHON_INSTALL_DIR "lib/python3/dist-packages" CACHE STRING
    "Where the kiln Python package goes, relative to the install prefix")

# libMLIR lives in LLVM's own directory, outside the loader's search path:
# the installed files carry it as their run path, as the built ones do.
set_target_properties(kiln kiln-opt kiln_python_bindings PROPERTIES
  INSTALL_RPATH "${KILN_LLVM_ROOT}/lib" BUILD_WITH_INSTALL_RPATH TRUE)
install(TARGETS kiln kiln-opt RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${CMAKE_BINARY_DIR}/python/kiln
        DESTINATION ${KILN_PYTHON_INSTALL_DIR}
        PATTERN "__pycache__" EXCLUDE)
install(FILES README.md DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/kiln)
install(DIRECTORY docs/ DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/kiln
        FILES_MATCHING PATTERN "*.md")

# The C++ trainer API: what a program like examples/cpp/train_mlp.cpp
# includes and links, and every Kiln library those link.
set(KILN_CPP_API_LIBRARIES KilnGraphBuilder KilnCompiler KilnSession KilnComm
  KilnReference KilnNpz)

# Sets `out_var` to `targets` and the Kiln libraries they link, directly or
# not (imported targets, Debian's, are left to find_package(Kiln)).
function(kiln_own_link_closure targets out_var)
  set(closure "")
  set(pending ${targets})
  while(pending)
    list(POP_FRONT pending target)
    if(target IN_LIST closure OR NOT TARGET ${target})
      continue()
    endif()
    get_target_property(imported ${target} IMPORTED)
    if(imported)
      continue()
    endif()
    list(APPEND closure ${target})
    get_target_property(links ${target} INTERFACE_LINK_LIBRARIES)
    foreach(link IN LISTS links)
      string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" link "${link}")
      list(APPEND pending ${link})
    endforeach()
  endwhile()
  set(${out_var} ${closure} PARENT_SCOPE)
endfunction()

kiln_own_link_closure("${KILN_CPP_API_LIBRARIES}" KILN_CPP_API_CLOSURE)
set(KILN_HEADER_DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kiln)
set(KILN_HEADER_DIRS "")
foreach(target IN LISTS KILN_CPP_API_CLOSURE)
  target_include_directories(${target} INTERFACE
    $<INSTALL_INTERFACE:${KILN_HEADER_DESTINATION}>)
  get_target_property(dir ${target} SOURCE_DIR)
  file(RELATIVE_PATH dir ${PROJECT_SOURCE_DIR} ${dir})
  list(APPEND KILN_HEADER_DIRS ${dir})
endforeach()
list(REMOVE_DUPLICATES KILN_HEADER_DIRS)
install(TARGETS ${KILN_CPP_API_CLOSURE} EXPORT KilnTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}/kiln COMPONENT dev)
# Each library's headers, and what the build generates beside them (the
# graph and artifact formats' protobuf headers, the dialects' TableGen
# output), keep their paths: `#include "runtime/session/Session.h"`.
foreach(dir IN LISTS KILN_HEADER_DIRS)
  install(DIRECTORY ${dir}/ ${CMAKE_BINARY_DIR}/${dir}/
          DESTINATION ${KILN_HEADER_DESTINATION}/${dir} COMPONENT dev
          FILES_MATCHING PATTERN "*.h" PATTERN "*.inc"
          PATTERN "CMakeFiles" EXCLUDE PATTERN "frontend" EXCLUDE
          PATTERN "python" EXCLUDE)
endforeach()

set(KILN_CMAKE_PACKAGE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/Kiln)
string(REGEX REPLACE "([^;]+)" "Kiln::\\1" KILN_CPP_API_TARGETS
       "${KILN_CPP_API_LIBRARIES}")
install(EXPORT KilnTargets NAMESPACE Kiln:: DESTINATION ${KILN_CMAKE_PACKAGE_DIR}
        COMPONENT dev)
configure_package_config_file(cmake/KilnConfig.cmake.in
  ${CMAKE_BINARY_DIR}/KilnConfig.cmake INSTALL_DESTINATION ${KILN_CMAKE_PACKAGE_DIR})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/KilnConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/KilnConfig.cmake
        ${CMAKE_BINARY_DIR}/KilnConfigVersion.cmake
        DESTINATION ${KILN_CMAKE_PACKAGE_DIR} COMPONENT dev)

set(CPACK_GENERATOR "DEB")
set(CPACK_PACKAGE_NAME "kiln")
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
set(CPACK_PACKAGE_CONTACT "Kiln maintainers")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "ahead-of-time compiler, compile cache and NeuronCore simulator for training graphs")
set(CPACK_PACKAGING_INSTALL_PREFIX "/usr")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION "devel")
# Two packages: kiln (the tools and the Python package) and kiln-dev (the
# C++ trainer API, with the -dev packages its CMake package finds).
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL kiln dev)
set(CPACK_DEBIAN_KILN_PACKAGE_NAME "kiln")
set(CPACK_DEBIAN_DEV_PACKAGE_NAME "kiln-dev")
set(CPACK_DEBIAN_KILN_PACKAGE_DEPENDS
    "libmlir-22, libllvm22, libprotobuf32, libgloo0, libdnnl2, libsqlite3-0, libzip4, libssl3, libcurl4, python3, python3-protobuf, python3-numpy, python3-torch")
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS
    "kiln (= ${PROJECT_VERSION}), cmake, g++, pkgconf, libmlir-22-dev, llvm-22-dev, libprotobuf-dev, libgloo-dev, libdnnl-dev, ocl-icd-opencl-dev, libsqlite3-dev, libzip-dev, libssl-dev, libcurl4-openssl-dev")
include(CPack)

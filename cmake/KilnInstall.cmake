# What `cmake --install` puts where, and the .deb CPack builds from it.
#
#   <prefix>/bin/kiln, kiln-opt       the compiler, cache and precompile CLI
#   <prefix>/lib/python3/dist-packages/kiln
#                                     the PyTorch front end and runtime
#                                     bindings, where Debian's python3 finds
#                                     packages under /usr (another prefix
#                                     needs PYTHONPATH)
#   <prefix>/share/doc/kiln           the user guides
#
# The tools and the extension module link Kiln's own libraries statically
# and Debian's shared ones (MLIR, LLVM, protobuf, Gloo, oneDNN, SQLite,
# libzip, OpenSSL): the package depends on those.

include(GNUInstallDirs)

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

set(CPACK_GENERATOR "DEB")
set(CPACK_PACKAGE_NAME "kiln")
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
set(CPACK_PACKAGE_CONTACT "Kiln maintainers")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "ahead-of-time compiler, compile cache and NeuronCore simulator for training graphs")
set(CPACK_PACKAGING_INSTALL_PREFIX "/usr")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION "devel")
set(CPACK_DEBIAN_PACKAGE_DEPENDS
    "libmlir-22, libllvm22, libprotobuf32, libgloo0, libdnnl2, libsqlite3-0, libzip4, libssl3, python3, python3-protobuf, python3-numpy, python3-torch")
include(CPack)

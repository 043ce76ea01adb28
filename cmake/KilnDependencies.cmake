# Finds every external dependency. A missing one stops configuration with one
# line naming the Debian package that provides it, because that is the only
# thing a user needs to know to fix it.

function(kiln_require found what package)
  if(NOT ${found})
    # NOTICE prints the line as it is; FATAL_ERROR would wrap it.
    message(NOTICE "kiln: Kiln needs ${what}: install the Debian package '${package}' (or run tools/dev.sh setup)")
    message(FATAL_ERROR "missing dependency: ${package}")
  endif()
endfunction()

set(KILN_LLVM_ROOT "/usr/lib/llvm-22" CACHE PATH "Root of the LLVM/MLIR 22 installation")
find_package(MLIR CONFIG QUIET HINTS "${KILN_LLVM_ROOT}/lib/cmake/mlir")
kiln_require(MLIR_FOUND "MLIR 22 (MLIRConfig.cmake)" "libmlir-22-dev")
find_package(LLVM CONFIG QUIET HINTS "${KILN_LLVM_ROOT}/lib/cmake/llvm")
kiln_require(LLVM_FOUND "LLVM 22 (LLVMConfig.cmake)" "llvm-22-dev")

find_program(KILN_MLIR_TBLGEN mlir-tblgen HINTS "${KILN_LLVM_ROOT}/bin" NO_DEFAULT_PATH)
kiln_require(KILN_MLIR_TBLGEN "mlir-tblgen" "libmlir-22-dev")
# kiln-isa-tblgen, the instruction set's TableGen backend, links LLVM's
# static TableGen library (Debian ships no other).
find_library(KILN_LLVM_TABLEGEN_LIBRARY libLLVMTableGen.a
  HINTS "${KILN_LLVM_ROOT}/lib" NO_DEFAULT_PATH)
kiln_require(KILN_LLVM_TABLEGEN_LIBRARY "LLVM's TableGen library (libLLVMTableGen.a)" "llvm-22-dev")
find_program(KILN_LIT lit HINTS "${KILN_LLVM_ROOT}/bin" "${KILN_LLVM_ROOT}/build/utils/lit" NO_DEFAULT_PATH)
find_program(KILN_FILECHECK FileCheck HINTS "${KILN_LLVM_ROOT}/bin" NO_DEFAULT_PATH)
kiln_require(KILN_FILECHECK "FileCheck" "llvm-22-tools")

find_package(Protobuf QUIET)
kiln_require(Protobuf_FOUND "the protobuf C++ library" "libprotobuf-dev")
kiln_require(Protobuf_PROTOC_EXECUTABLE "protoc" "protobuf-compiler")

find_package(SQLite3 QUIET)
kiln_require(SQLite3_FOUND "SQLite 3" "libsqlite3-dev")

find_package(fmt CONFIG QUIET)
kiln_require(fmt_FOUND "fmt" "libfmt-dev")

find_package(GTest CONFIG QUIET)
if(NOT GTest_FOUND)
  find_package(GTest QUIET)
endif()
kiln_require(GTest_FOUND "GoogleTest" "libgtest-dev")

find_package(PkgConfig QUIET)
kiln_require(PKG_CONFIG_FOUND "pkg-config" "pkgconf")
pkg_check_modules(LIBZIP QUIET IMPORTED_TARGET libzip)
kiln_require(LIBZIP_FOUND "libzip" "libzip-dev")

find_package(ZLIB QUIET)
kiln_require(ZLIB_FOUND "zlib" "zlib1g-dev")

# Debian's oneDNN config finds OpenCL (its GPU runtime) as REQUIRED: check
# first, so that a missing package is named instead of failing inside it.
find_package(OpenCL QUIET)
kiln_require(OpenCL_FOUND "OpenCL headers (for oneDNN's CMake package)" "ocl-icd-opencl-dev")
find_package(dnnl CONFIG QUIET)
kiln_require(dnnl_FOUND "oneDNN (the simulator's GEMM)" "libdnnl-dev")

# The cache's remote tiers (HTTP, and S3 with its Signature Version 4).
find_package(CURL QUIET)
kiln_require(CURL_FOUND "libcurl" "libcurl4-openssl-dev")

find_package(OpenSSL QUIET)
kiln_require(OpenSSL_FOUND "OpenSSL's libcrypto (SHA-256)" "libssl-dev")

# The Python front end: Debian's interpreter (not whatever python3 is first on
# PATH) and pybind11 for the runtime's bindings.
set(Python3_EXECUTABLE /usr/bin/python3 CACHE FILEPATH "The Python with Debian's torch")
find_package(Python3 COMPONENTS Interpreter Development.Module QUIET)
kiln_require(Python3_FOUND "Python 3 headers" "python3-dev")
find_package(pybind11 CONFIG QUIET)
kiln_require(pybind11_FOUND "pybind11" "pybind11-dev")

# Collectives between data-parallel workers.
find_package(Gloo CONFIG QUIET)
kiln_require(Gloo_FOUND "Gloo" "libgloo-dev")
find_package(Threads REQUIRED)

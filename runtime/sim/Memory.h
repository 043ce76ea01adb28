//===- Memory.h - the simulated HBM, SBUF and PSUM --------------*- C++ -*-===//

#ifndef KILN_RUNTIME_SIM_MEMORY_H
#define KILN_RUNTIME_SIM_MEMORY_H

#include "compiler/target/Isa.h"

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <random>
#include <vector>

namespace kiln::sim {

/// One memory: `rows` partitions (1 for HBM) of `rowBytes` bytes, with a
/// written-bit per byte so that reading memory nothing wrote gives NaN (a
/// missing DMA or a wrong offset shows up in results, not behind zeros).
class MemoryArray {
public:
  MemoryArray() = default;
  MemoryArray(int64_t rows, int64_t rowBytes)
      : rows(rows), rowBytes(rowBytes),
        rowStride(rows > 1 ? rowBytes + kRowSkew : rowBytes),
        bytes(zeroed(rows * rowStride)), written(zeroed(rows * rowStride)) {}

  /// The element of `dtype` at (row, byte), as a double; NaN if unwritten.
  double read(int64_t row, int64_t byte, isa::DType dtype) const;
  /// Stores `value` (already rounded to `dtype`) at (row, byte).
  void write(int64_t row, int64_t byte, isa::DType dtype, double value);
  /// Raw bytes in and out (HBM buffers).
  void store(int64_t byte, const char *data, int64_t size);
  void load(int64_t byte, char *data, int64_t size) const;

  /// Direct access for the fast kernels (runtime/sim/Kernels.cpp), which
  /// move whole contiguous runs instead of one element at a time.
  const uint8_t *data(int64_t row, int64_t byte) const {
    return bytes.get() + row * rowStride + byte;
  }
  uint8_t *data(int64_t row, int64_t byte) {
    return bytes.get() + row * rowStride + byte;
  }
  const uint8_t *writtenData(int64_t row, int64_t byte) const {
    return written.get() + row * rowStride + byte;
  }
  /// Bytes from one row's start to the next's (a GEMM's leading dimension).
  int64_t rowPitch() const { return rowStride; }
  /// Whether every one of `size` bytes at (row, byte) has been written.
  bool isWritten(int64_t row, int64_t byte, int64_t size) const;
  void markWritten(int64_t row, int64_t byte, int64_t size);

private:
  /// Rows lie this much further apart than their size: SBUF and PSUM rows
  /// are multiples of 4 KiB, so without it the same byte of every partition
  /// falls in one cache set, and walking across partitions (a transpose, a
  /// matmul's operands) thrashes it.
  static constexpr int64_t kRowSkew = 64;
  struct Unmap {
    size_t size = 0;
    void operator()(uint8_t *p) const;
  };
  using Storage = std::unique_ptr<uint8_t[], Unmap>;
  /// `size` zero bytes mapped as untouched zero pages, so a simulator pays
  /// only for the memory its program uses, not for all of SBUF and HBM up
  /// front; in huge pages where the host allows, since the kernels stride
  /// across partitions a row apart.
  static Storage zeroed(int64_t size);

  int64_t rows = 0, rowBytes = 0, rowStride = 0;
  Storage bytes, written;
};

/// Rounding of simulator results: f32 and f16 round to nearest even; bf16
/// rounds to nearest even, or stochastically when enabled, from a generator
/// seeded once so a run reproduces bit for bit.
class Rounder {
public:
  explicit Rounder(bool stochastic = false, uint64_t seed = 0)
      : stochastic(stochastic), state(seed) {}
  double round(isa::DType dtype, double value);
  bool isStochastic() const { return stochastic; }

private:
  bool stochastic;
  uint64_t state;
};

} // namespace kiln::sim

#endif // KILN_RUNTIME_SIM_MEMORY_H

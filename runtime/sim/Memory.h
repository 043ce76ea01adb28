//===- Memory.h - the simulated HBM, SBUF and PSUM --------------*- C++ -*-===//

#ifndef KILN_RUNTIME_SIM_MEMORY_H
#define KILN_RUNTIME_SIM_MEMORY_H

#include "compiler/target/Isa.h"

#include <cstdint>
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
      : rows(rows), rowBytes(rowBytes), bytes(rows * rowBytes, 0),
        written(rows * rowBytes, 0) {}

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
    return bytes.data() + row * rowBytes + byte;
  }
  uint8_t *data(int64_t row, int64_t byte) {
    return bytes.data() + row * rowBytes + byte;
  }
  const uint8_t *writtenData(int64_t row, int64_t byte) const {
    return written.data() + row * rowBytes + byte;
  }
  int64_t bytesPerRow() const { return rowBytes; }
  /// Whether every one of `size` bytes at (row, byte) has been written.
  bool isWritten(int64_t row, int64_t byte, int64_t size) const;
  void markWritten(int64_t row, int64_t byte, int64_t size);

private:
  int64_t rows = 0, rowBytes = 0;
  std::vector<uint8_t> bytes, written;
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

//===- Artifact.h - the .kneff artifact: model, writer, reader --*- C++ -*-===//
//
// A .kneff file is a fixed header, a section table and 64-byte-aligned
// sections: a protobuf manifest, one instruction stream per engine, the
// constants, and optionally the source IR. docs/kneff-format.md is the full
// specification; this is its one implementation, with no MLIR dependency so
// the runtime can load artifacts on its own.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_ARTIFACT_ARTIFACT_H
#define KILN_RUNTIME_ARTIFACT_ARTIFACT_H

#include "compiler/target/Isa.h"
#include "runtime/artifact/kneff.pb.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/MemoryBuffer.h"

#include <memory>
#include <string>
#include <vector>

namespace kiln::artifact {

inline constexpr uint16_t kFormatMajor = 1;
inline constexpr uint16_t kFormatMinor = 11;
/// Feature bit 0: the instruction-stream sections are zstd frames of the
/// records (docs/kneff-format.md, "Compressed streams").
inline constexpr uint32_t kFeatureCompressedStreams = 1;
inline constexpr uint32_t kKnownFeatures = kFeatureCompressedStreams;
inline constexpr size_t kHeaderBytes = 192;
inline constexpr size_t kSectionEntryBytes = 32;
inline constexpr size_t kInstructionBytes = 360;
inline constexpr size_t kAlignment = 64;

enum class SectionKind : uint32_t {
  Manifest = 1,
  Stream = 2,
  Constants = 3,
  SourceIR = 4
};

/// One engine's in-order instruction stream. DMA queues are engines of their
/// own (engine Dma, queue 0..15).
struct Stream {
  isa::Engine engine = isa::Engine::Tensor;
  uint8_t queue = 0;
  std::vector<isa::Instruction> instructions;
};

/// Everything a .kneff holds.
struct Artifact {
  kneff::Manifest manifest;
  std::vector<Stream> streams;
  /// The constants section as the compiler builds it. An artifact loaded by
  /// loadArtifactFile leaves this empty and serves its constants straight
  /// from the file mapping, which `mapping` keeps alive: weights are not
  /// copied at load. Read them through constantBytes().
  std::string constants;
  std::shared_ptr<const llvm::MemoryBuffer> mapping;
  llvm::StringRef mappedConstants;
  /// The program's kisa text, where an artifact has it (the compiler writes
  /// none; see docs/kneff-format.md).
  std::string sourceIR;
  // Header fields. The reader sets the format's minor version and feature
  // bits from the file; the writer writes its own.
  std::string compilerVersion;
  std::string gitHash;
  uint16_t formatMinor = kFormatMinor;
  uint32_t features = 0;

  llvm::StringRef constantBytes() const {
    return mapping ? mappedConstants : llvm::StringRef(constants);
  }
};

/// The artifact's bytes (deterministic: the same artifact gives the same
/// bytes). Streams are written in engine, then queue order, compressed
/// unless `compressStreams` is false (or this build's LLVM lacks zstd).
std::string writeArtifact(const Artifact &artifact,
                          bool compressStreams = true);

/// Parses and completely validates an artifact: header, checksum, version,
/// target (`expectedTarget`, when not empty), sections, manifest and every
/// instruction. Errors name `origin` and what is wrong.
llvm::Expected<Artifact> readArtifact(llvm::StringRef bytes,
                                      llvm::StringRef origin,
                                      llvm::StringRef expectedTarget = "");

/// readArtifact on a memory-mapped file.
llvm::Expected<Artifact> loadArtifactFile(llvm::StringRef path,
                                          llvm::StringRef expectedTarget = "");

/// Instruction records: exactly kInstructionBytes, little-endian.
void encodeInstruction(const isa::Instruction &inst, char *out);
isa::Instruction decodeInstruction(const char *in);

/// SHA-256 of the instruction schema text (the header's schema hash).
std::string schemaHash();

/// The stream's display name: "tensor", "vector", ..., "dma3".
std::string streamName(isa::Engine engine, uint8_t queue);

} // namespace kiln::artifact

#endif // KILN_RUNTIME_ARTIFACT_ARTIFACT_H

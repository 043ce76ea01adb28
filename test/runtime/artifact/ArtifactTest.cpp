//===- ArtifactTest.cpp - .kneff writing, reading and validation ---------===//

#include "runtime/artifact/Artifact.h"
#include "compiler/emit/ArtifactEmission.h"
#include "test/support/TestSupport.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Endian.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SHA256.h"

#include "mlir/IR/Verifier.h"

#include <cstring>

using namespace kiln;

namespace {

std::string sourcePath(llvm::StringRef relative) {
  return (llvm::Twine(KILN_SOURCE_DIR) + "/" + relative).str();
}

/// The tiled-matmul example, assembled.
std::string assembleExample(mlir::MLIRContext &context, llvm::StringRef name) {
  auto buffer = llvm::MemoryBuffer::getFile(
      sourcePath("examples/kisa/" + name.str() + ".mlir"));
  EXPECT_TRUE(static_cast<bool>(buffer));
  auto module = test::parse(context, (*buffer)->getBuffer());
  auto program = emit::getProgram(*module);
  EXPECT_TRUE(static_cast<bool>(program));
  auto artifact = emit::assembleProgram(*program);
  EXPECT_TRUE(static_cast<bool>(artifact));
  return artifact::writeArtifact(*artifact);
}

/// Rewrites the content checksum after a deliberate edit, so that the
/// validation behind the checksum is what a test exercises.
void resign(std::string &bytes) {
  llvm::SHA256 sha;
  sha.update(llvm::StringRef(bytes).drop_front(artifact::kHeaderBytes));
  auto hash = sha.final();
  std::memcpy(bytes.data() + 72, hash.data(), 32);
}

std::string loadError(const std::string &bytes) {
  return test::errorOf(artifact::readArtifact(bytes, "x.kneff"));
}

TEST(Artifact, RoundTripIsLosslessAndDeterministic) {
  auto context = test::makeContext();
  for (llvm::StringRef name :
       {"tiled_matmul", "softmax_rows", "double_buffered_elementwise"}) {
    std::string bytes = assembleExample(*context, name);
    EXPECT_EQ(bytes, assembleExample(*context, name))
        << name.str() << ": not deterministic";
    auto read = artifact::readArtifact(bytes, name);
    ASSERT_TRUE(static_cast<bool>(read)) << llvm::toString(read.takeError());
    // kisa -> kneff -> kisa -> kneff gives the same instructions and bytes.
    auto module = emit::disassembleArtifact(*read, *context);
    ASSERT_TRUE(mlir::succeeded(mlir::verify(*module)));
    auto again = emit::assembleProgram(*emit::getProgram(*module));
    ASSERT_TRUE(static_cast<bool>(again));
    again->compilerVersion = read->compilerVersion;
    again->gitHash = read->gitHash;
    EXPECT_EQ(artifact::writeArtifact(*again), bytes) << name.str();
    ASSERT_EQ(again->streams.size(), read->streams.size());
    for (size_t s = 0; s < read->streams.size(); ++s) {
      EXPECT_EQ(again->streams[s].instructions, read->streams[s].instructions);
    }
  }
}

TEST(Artifact, HeaderMatchesTheGoldenFile) {
  auto context = test::makeContext();
  std::string bytes = assembleExample(*context, "tiled_matmul");
  // Magic, version, features, header size, section count and table, file
  // size, and the instruction schema hash: the fields that only change when
  // the format does. (Checksum and compiler identity follow the contents.)
  std::string header = llvm::toHex(llvm::StringRef(bytes).take_front(72), true);
  auto golden = llvm::MemoryBuffer::getFile(
      sourcePath("test/runtime/artifact/Inputs/tiled_matmul.header.golden"));
  ASSERT_TRUE(static_cast<bool>(golden));
  EXPECT_EQ(header, llvm::StringRef((*golden)->getBuffer()).trim().str())
      << "the .kneff header changed: if deliberate, bump the format version "
         "and update the golden file and docs/kneff-format.md";
}

TEST(Artifact, CorruptionIsDetected) {
  auto context = test::makeContext();
  std::string good = assembleExample(*context, "tiled_matmul");

  std::string flipped = good;
  flipped[good.size() / 2] ^= 0x20;
  EXPECT_EQ(loadError(flipped),
            "artifact 'x.kneff': checksum mismatch: the file is corrupt");

  EXPECT_NE(loadError(good.substr(0, good.size() / 2)).find("is truncated"),
            std::string::npos);
  EXPECT_NE(loadError(""), "");
  EXPECT_NE(loadError(good.substr(0, 100)).find("bad magic"),
            std::string::npos);

  std::string major = good;
  llvm::support::endian::write16le(major.data() + 8, 2);
  EXPECT_EQ(loadError(major),
            "artifact 'x.kneff': format version 2.11 is not readable "
            "by this Kiln (it reads 1.x); recompile the graph");

  std::string feature = good;
  llvm::support::endian::write32le(feature.data() + 12, 0x10);
  EXPECT_NE(loadError(feature).find("feature bits 0x10"), std::string::npos);

  std::string schema = good;
  schema[40] ^= 1;
  EXPECT_NE(loadError(schema).find("instruction schema differs"),
            std::string::npos);

  // An older minor version's schema is still readable (minors only append
  // opcodes and field values), but only under that minor's number.
  std::string older = good;
  llvm::support::endian::write16le(older.data() + 10, 1);
  std::string minor1Schema = llvm::fromHex(
      "2c2fc8b6fec3bcf7b2cf18055fe42e4703ed9be2b1fc2fe56d41e76b38dd50f0");
  std::copy(minor1Schema.begin(), minor1Schema.end(), older.begin() + 40);
  EXPECT_TRUE(static_cast<bool>(artifact::readArtifact(older, "x.kneff")));
  llvm::support::endian::write16le(older.data() + 10, 0);
  EXPECT_NE(loadError(older).find("instruction schema differs"),
            std::string::npos);
  // Minor 8 changed no instruction: its artifacts carry minor 7's schema.
  std::string minor7Schema = llvm::fromHex(
      "f192ccd6815024c1ff0f03fbdadceffaf5af6a6b29d1ea9e57a8da2e129422a2");
  std::copy(minor7Schema.begin(), minor7Schema.end(), older.begin() + 40);
  llvm::support::endian::write16le(older.data() + 10, 8);
  EXPECT_TRUE(static_cast<bool>(artifact::readArtifact(older, "x.kneff")));

  // A section table offset so large that adding the table's size to it
  // wraps round into the file (found by the loader's fuzzer).
  std::string wrapped = good;
  llvm::support::endian::write64le(wrapped.data() + 24, ~uint64_t(0) - 31);
  resign(wrapped);
  EXPECT_EQ(loadError(wrapped),
            "artifact 'x.kneff': section table lies outside the file");

  EXPECT_NE(test::errorOf(artifact::readArtifact(good, "x.kneff", "trn2"))
                .find("is compiled for trn1, not trn2"),
            std::string::npos);
}

TEST(Artifact, HostileInstructionsAreRefusedBeforeAnythingRuns) {
  auto context = test::makeContext();
  std::string good = assembleExample(*context, "tiled_matmul");
  auto read = artifact::readArtifact(good, "x");
  ASSERT_TRUE(static_cast<bool>(read));
  // Edit the first instruction of the first stream (TensorE's matmul) and
  // write the file again, compressed and signed, as an attacker would.
  auto edited = [&](auto edit) {
    artifact::Artifact forged = *read;
    edit(forged.streams[0].instructions[0]);
    return loadError(artifact::writeArtifact(forged));
  };
  EXPECT_EQ(
      edited([](isa::Instruction &i) { i.operands[0].partitions = 300; }),
      "artifact 'x.kneff': tensor instruction 0 ('matmul'): operand 'dst': 300 "
      "partitions is not in [1, 128]");
  EXPECT_NE(edited([](isa::Instruction &i) {
              i.operands[1].offset = 196600;
            }).find("exceed the 196608 bytes"),
            std::string::npos);
  EXPECT_NE(edited([](isa::Instruction &i) {
              i.waitSemaphore[0] = 99;
            }).find("waits on semaphore 99"),
            std::string::npos);
  EXPECT_NE(edited([](isa::Instruction &i) {
              i.opcode = static_cast<isa::Opcode>(77);
            }).find("unknown opcode 77"),
            std::string::npos);
  EXPECT_NE(edited([](isa::Instruction &i) {
              i.engine = isa::Engine::Vector;
            }).find("belongs to another engine's stream"),
            std::string::npos);
  EXPECT_NE(edited([](isa::Instruction &i) {
              i.numOperands = 200;
            }).find("bad counts"),
            std::string::npos);
  std::string rank =
      edited([](isa::Instruction &i) { i.operands[2].rank = 9; });
  EXPECT_NE(rank.find("rank 9 is not in [1, 4]"), std::string::npos) << rank;
}

/// The section table entry of the first instruction stream.
char *firstStreamEntry(std::string &bytes) {
  uint64_t table = llvm::support::endian::read64le(bytes.data() + 24);
  uint32_t count = llvm::support::endian::read32le(bytes.data() + 20);
  for (uint32_t i = 0; i < count; ++i) {
    char *entry = bytes.data() + table + 32 * i;
    if (llvm::support::endian::read32le(entry) == 2) {
      return entry;
    }
  }
  return nullptr;
}

TEST(Artifact, StreamsAreCompressedAndPlainOnesStillRead) {
  auto context = test::makeContext();
  std::string compressed = assembleExample(*context, "tiled_matmul");
  auto read = artifact::readArtifact(compressed, "x");
  ASSERT_TRUE(static_cast<bool>(read)) << llvm::toString(read.takeError());
  EXPECT_EQ(llvm::support::endian::read32le(compressed.data() + 12),
            artifact::kFeatureCompressedStreams);
  std::string plain = artifact::writeArtifact(*read, /*compressStreams=*/false);
  EXPECT_EQ(llvm::support::endian::read32le(plain.data() + 12), 0u);
  EXPECT_LT(compressed.size(), plain.size());
  auto fromPlain = artifact::readArtifact(plain, "x");
  ASSERT_TRUE(static_cast<bool>(fromPlain))
      << llvm::toString(fromPlain.takeError());
  ASSERT_EQ(fromPlain->streams.size(), read->streams.size());
  for (size_t s = 0; s < read->streams.size(); ++s) {
    EXPECT_EQ(fromPlain->streams[s].instructions, read->streams[s].instructions);
  }
  EXPECT_EQ(artifact::writeArtifact(*fromPlain), compressed);
}

TEST(Artifact, BrokenCompressedStreamsAreRefused) {
  auto context = test::makeContext();
  std::string good = assembleExample(*context, "tiled_matmul");

  // A damaged frame, re-signed so that the checksum does not catch it.
  std::string damaged = good;
  char *entry = firstStreamEntry(damaged);
  ASSERT_NE(entry, nullptr);
  uint64_t offset = llvm::support::endian::read64le(entry + 8);
  damaged[offset + 1] ^= 0x5a;
  resign(damaged);
  EXPECT_NE(loadError(damaged).find(
                "stream does not decompress to its"),
            std::string::npos)
      << loadError(damaged);

  // A count the frame does not hold, and one beyond any real expansion.
  std::string miscounted = good;
  entry = firstStreamEntry(miscounted);
  uint64_t count = llvm::support::endian::read64le(entry + 24);
  llvm::support::endian::write64le(entry + 24, count + 1);
  resign(miscounted);
  EXPECT_NE(loadError(miscounted).find("does not decompress to its"),
            std::string::npos)
      << loadError(miscounted);
  llvm::support::endian::write64le(entry + 24, uint64_t(1) << 40);
  resign(miscounted);
  EXPECT_NE(loadError(miscounted).find("instructions"), std::string::npos)
      << loadError(miscounted);

  // In a plain stream, a count with bit 61 set times 360 wraps to the same
  // size (found by the loader's fuzzer).
  auto read = artifact::readArtifact(good, "x");
  ASSERT_TRUE(static_cast<bool>(read));
  std::string plain = artifact::writeArtifact(*read, /*compressStreams=*/false);
  entry = firstStreamEntry(plain);
  count = llvm::support::endian::read64le(entry + 24);
  llvm::support::endian::write64le(entry + 24, count | uint64_t(1) << 61);
  resign(plain);
  EXPECT_NE(loadError(plain).find("instructions"), std::string::npos)
      << loadError(plain);
}

} // namespace

namespace {

class ArtifactFile : public test::TempDirTest {};

TEST_F(ArtifactFile, ConstantsAreServedFromTheMappingNotCopied) {
  artifact::Artifact a;
  a.manifest.set_name("weights");
  a.manifest.set_target("trn1");
  // Large enough that the file is memory-mapped rather than read.
  std::string weights(1 << 20, '\0');
  for (size_t i = 0; i < weights.size(); ++i) {
    weights[i] = static_cast<char>(i * 7 % 251);
  }
  a.constants = weights;
  a.manifest.set_hbm_bytes(weights.size());
  kneff::Buffer *b = a.manifest.add_buffers();
  b->set_name("w");
  b->set_role(kneff::CONSTANT);
  b->set_dtype(static_cast<uint32_t>(isa::DType::F32));
  b->add_shape(static_cast<int64_t>(weights.size() / 4));
  b->set_constant_bytes(weights.size());
  writeBytes("w.kneff", artifact::writeArtifact(a));

  auto loaded = artifact::loadArtifactFile(path("w.kneff"), "trn1");
  ASSERT_TRUE(static_cast<bool>(loaded)) << llvm::toString(loaded.takeError());
  ASSERT_TRUE(loaded->mapping);
  EXPECT_TRUE(loaded->constants.empty());
  llvm::StringRef mapped = loaded->mapping->getBuffer();
  EXPECT_GE(loaded->constantBytes().data(), mapped.begin());
  EXPECT_LE(loaded->constantBytes().end(), mapped.end());
  EXPECT_EQ(loaded->constantBytes(), weights);
  // The view outlives copies of the artifact, and writes back identically.
  artifact::Artifact copy = *loaded;
  loaded = llvm::make_error<llvm::StringError>("dropped",
                                               llvm::inconvertibleErrorCode());
  llvm::consumeError(loaded.takeError());
  EXPECT_EQ(copy.constantBytes(), weights);
  EXPECT_EQ(artifact::writeArtifact(copy), artifact::writeArtifact(a));
}

} // namespace

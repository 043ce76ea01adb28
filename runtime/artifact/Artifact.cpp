//===- Artifact.cpp - the .kneff writer and validating reader ------------===//

#include "runtime/artifact/Artifact.h"

#include "compiler/support/Sha256.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Compression.h"
#include "llvm/Support/Endian.h"

#include <algorithm>
#include <cstring>

namespace kiln::artifact {

namespace {

using namespace llvm::support::endian;

constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'N', 'E', 'F', 'F'};

// Header field offsets (docs/kneff-format.md).
enum : size_t {
  kOffMagic = 0,
  kOffMajor = 8,
  kOffMinor = 10,
  kOffFeatures = 12,
  kOffHeaderBytes = 16,
  kOffSectionCount = 20,
  kOffSectionTable = 24,
  kOffFileBytes = 32,
  kOffSchemaHash = 40,
  kOffContentHash = 72,
  kOffCompilerVersion = 104,
  kOffGitHash = 120,
  kOffTarget = 136,
};

std::array<uint8_t, 32> sha256(llvm::StringRef bytes) {
  return support::sha256(bytes);
}

void putString(char *out, llvm::StringRef value, size_t size) {
  std::memset(out, 0, size);
  std::memcpy(out, value.data(), std::min(value.size(), size));
}

llvm::StringRef getString(const char *in, size_t size) {
  return llvm::StringRef(in, strnlen(in, size));
}

size_t alignUp(size_t n) {
  return (n + kAlignment - 1) / kAlignment * kAlignment;
}

/// zstd's fastest level: the records compress about 40 times even so, and
/// a level that compresses harder costs more compile time than it saves.
constexpr int kStreamCompressionLevel =
    llvm::compression::zstd::BestSpeedCompression;

/// The most a legitimate stream expands by (the records of real programs
/// compress 20 to 60 times): a bound on what a section may claim to hold,
/// so that a forged count cannot make the reader allocate without limit.
constexpr uint64_t kMaxExpansion = 4096;

/// One stream's records, zstd-compressed when `compress` is set.
std::string streamBytes(const Stream &stream, bool compress) {
  std::string bytes(stream.instructions.size() * kInstructionBytes, '\0');
  for (size_t i = 0; i < stream.instructions.size(); ++i) {
    encodeInstruction(stream.instructions[i],
                      bytes.data() + i * kInstructionBytes);
  }
  if (!compress) {
    return bytes;
  }
  llvm::SmallVector<uint8_t, 0> compressed;
  llvm::compression::zstd::compress(llvm::arrayRefFromStringRef(bytes),
                                    compressed, kStreamCompressionLevel);
  return std::string(llvm::toStringRef(compressed));
}

uint64_t doubleBits(double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, 8);
  return bits;
}

double bitsDouble(uint64_t bits) {
  double v;
  std::memcpy(&v, &bits, 8);
  return v;
}

// Instruction record layout.
enum : size_t {
  kInstOpcode = 0,
  kInstEngine = 1,
  kInstQueue = 2,
  kInstOp0 = 3,
  kInstOp1 = 4,
  kInstFlags = 5,
  kInstNumOperands = 6,
  kInstNumWaits = 7,
  kInstNumSignals = 8,
  kInstImm0 = 16,
  kInstImm1 = 24,
  kInstInt0 = 32,
  kInstInt1 = 40,
  kInstInt2 = 48,
  kInstWaits = 56,    // 4 x (u16 semaphore, u16 0, u32 value)
  kInstSignals = 88,  // 4 x u16
  kInstOperands = 96, // 3 x 88
  kApBytes = 88,
};

void encodeAccessPattern(const isa::AccessPattern &ap, char *out) {
  std::memset(out, 0, kApBytes);
  out[0] = static_cast<char>(ap.memory);
  out[1] = static_cast<char>(ap.dtype);
  out[2] = static_cast<char>(ap.rank);
  write16le(out + 4, ap.partition);
  write16le(out + 6, ap.partitions);
  write64le(out + 8, static_cast<uint64_t>(ap.offset));
  write64le(out + 16, static_cast<uint64_t>(ap.partitionStride));
  for (int d = 0; d < isa::kMaxRank; ++d) {
    write64le(out + 24 + 8 * d, static_cast<uint64_t>(ap.strides[d]));
    write64le(out + 56 + 8 * d, static_cast<uint64_t>(ap.sizes[d]));
  }
}

isa::AccessPattern decodeAccessPattern(const char *in) {
  isa::AccessPattern ap;
  ap.memory = static_cast<isa::Memory>(static_cast<uint8_t>(in[0]));
  ap.dtype = static_cast<isa::DType>(static_cast<uint8_t>(in[1]));
  ap.rank = static_cast<uint8_t>(in[2]);
  ap.partition = read16le(in + 4);
  ap.partitions = read16le(in + 6);
  ap.offset = static_cast<int64_t>(read64le(in + 8));
  ap.partitionStride = static_cast<int64_t>(read64le(in + 16));
  for (int d = 0; d < isa::kMaxRank; ++d) {
    ap.strides[d] = static_cast<int64_t>(read64le(in + 24 + 8 * d));
    ap.sizes[d] = static_cast<int64_t>(read64le(in + 56 + 8 * d));
  }
  return ap;
}

struct SectionEntry {
  SectionKind kind;
  uint32_t stream; // engine << 8 | queue, for streams
  uint64_t offset, size, count;
};

} // namespace

void encodeInstruction(const isa::Instruction &inst, char *out) {
  std::memset(out, 0, kInstructionBytes);
  out[kInstOpcode] = static_cast<char>(inst.opcode);
  out[kInstEngine] = static_cast<char>(inst.engine);
  out[kInstQueue] = static_cast<char>(inst.queue);
  out[kInstOp0] = static_cast<char>(inst.op0);
  out[kInstOp1] = static_cast<char>(inst.op1);
  out[kInstFlags] = static_cast<char>(inst.flags);
  out[kInstNumOperands] = static_cast<char>(inst.numOperands);
  out[kInstNumWaits] = static_cast<char>(inst.numWaits);
  out[kInstNumSignals] = static_cast<char>(inst.numSignals);
  write64le(out + kInstImm0, doubleBits(inst.imm0));
  write64le(out + kInstImm1, doubleBits(inst.imm1));
  write64le(out + kInstInt0, static_cast<uint64_t>(inst.int0));
  write64le(out + kInstInt1, static_cast<uint64_t>(inst.int1));
  write64le(out + kInstInt2, static_cast<uint64_t>(inst.int2));
  for (int i = 0; i < isa::kMaxWaits; ++i) {
    bool used = i < inst.numWaits;
    write16le(out + kInstWaits + 8 * i, used ? inst.waitSemaphore[i] : 0);
    write32le(out + kInstWaits + 8 * i + 4, used ? inst.waitValue[i] : 0);
  }
  for (int i = 0; i < isa::kMaxSignals; ++i) {
    write16le(out + kInstSignals + 2 * i,
              i < inst.numSignals ? inst.signalSemaphore[i] : 0);
  }
  for (int i = 0; i < isa::kMaxOperands; ++i) {
    encodeAccessPattern(i < inst.numOperands ? inst.operands[i]
                                             : isa::AccessPattern{},
                        out + kInstOperands + kApBytes * i);
  }
}

isa::Instruction decodeInstruction(const char *in) {
  isa::Instruction inst;
  inst.opcode = static_cast<isa::Opcode>(static_cast<uint8_t>(in[kInstOpcode]));
  inst.engine = static_cast<isa::Engine>(static_cast<uint8_t>(in[kInstEngine]));
  inst.queue = static_cast<uint8_t>(in[kInstQueue]);
  inst.op0 = static_cast<uint8_t>(in[kInstOp0]);
  inst.op1 = static_cast<uint8_t>(in[kInstOp1]);
  inst.flags = static_cast<uint8_t>(in[kInstFlags]);
  inst.numOperands = static_cast<uint8_t>(in[kInstNumOperands]);
  inst.numWaits = static_cast<uint8_t>(in[kInstNumWaits]);
  inst.numSignals = static_cast<uint8_t>(in[kInstNumSignals]);
  inst.imm0 = bitsDouble(read64le(in + kInstImm0));
  inst.imm1 = bitsDouble(read64le(in + kInstImm1));
  inst.int0 = static_cast<int64_t>(read64le(in + kInstInt0));
  inst.int1 = static_cast<int64_t>(read64le(in + kInstInt1));
  inst.int2 = static_cast<int64_t>(read64le(in + kInstInt2));
  for (int i = 0; i < isa::kMaxWaits; ++i) {
    inst.waitSemaphore[i] = read16le(in + kInstWaits + 8 * i);
    inst.waitValue[i] = read32le(in + kInstWaits + 8 * i + 4);
  }
  for (int i = 0; i < isa::kMaxSignals; ++i) {
    inst.signalSemaphore[i] = read16le(in + kInstSignals + 2 * i);
  }
  for (int i = 0; i < isa::kMaxOperands; ++i) {
    inst.operands[i] = decodeAccessPattern(in + kInstOperands + kApBytes * i);
  }
  return inst;
}

std::string schemaHash() {
  auto hash = sha256(isa::encodingSchemaText());
  return std::string(reinterpret_cast<const char *>(hash.data()), hash.size());
}

std::string streamName(isa::Engine engine, uint8_t queue) {
  std::string name = isa::engineName(engine).str();
  if (engine == isa::Engine::Dma) {
    name += std::to_string(queue);
  }
  return name;
}

std::string writeArtifact(const Artifact &artifact, bool compressStreams) {
  compressStreams =
      compressStreams && llvm::compression::zstd::isAvailable();
  std::vector<std::pair<SectionEntry, std::string>> sections;
  std::string manifest;
  artifact.manifest.SerializeToString(&manifest);
  sections.push_back(
      {{SectionKind::Manifest, 0, 0, manifest.size(), 0}, manifest});

  std::vector<const Stream *> streams;
  for (const Stream &s : artifact.streams) {
    if (!s.instructions.empty()) {
      streams.push_back(&s);
    }
  }
  std::sort(
      streams.begin(), streams.end(), [](const Stream *a, const Stream *b) {
        return std::pair(a->engine, a->queue) < std::pair(b->engine, b->queue);
      });
  for (const Stream *s : streams) {
    std::string bytes = streamBytes(*s, compressStreams);
    uint32_t key = (static_cast<uint32_t>(s->engine) << 8) | s->queue;
    sections.push_back(
        {{SectionKind::Stream, key, 0, bytes.size(), s->instructions.size()},
         std::move(bytes)});
  }
  sections.push_back(
      {{SectionKind::Constants, 0, 0, artifact.constantBytes().size(), 0},
       artifact.constantBytes().str()});
  if (!artifact.sourceIR.empty()) {
    sections.push_back(
        {{SectionKind::SourceIR, 0, 0, artifact.sourceIR.size(), 0},
         artifact.sourceIR});
  }

  size_t tableOffset = kHeaderBytes;
  size_t cursor = alignUp(tableOffset + sections.size() * kSectionEntryBytes);
  for (auto &[entry, bytes] : sections) {
    entry.offset = cursor;
    cursor = alignUp(cursor + bytes.size());
  }
  std::string file(cursor, '\0');
  for (size_t i = 0; i < sections.size(); ++i) {
    const auto &[entry, bytes] = sections[i];
    char *e = file.data() + tableOffset + i * kSectionEntryBytes;
    write32le(e, static_cast<uint32_t>(entry.kind));
    write32le(e + 4, entry.stream);
    write64le(e + 8, entry.offset);
    write64le(e + 16, entry.size);
    write64le(e + 24, entry.count);
    std::memcpy(file.data() + entry.offset, bytes.data(), bytes.size());
  }
  char *h = file.data();
  std::memcpy(h + kOffMagic, kMagic, 8);
  write16le(h + kOffMajor, kFormatMajor);
  write16le(h + kOffMinor, kFormatMinor);
  write32le(h + kOffFeatures, compressStreams ? kFeatureCompressedStreams : 0);
  write32le(h + kOffHeaderBytes, kHeaderBytes);
  write32le(h + kOffSectionCount, static_cast<uint32_t>(sections.size()));
  write64le(h + kOffSectionTable, tableOffset);
  write64le(h + kOffFileBytes, file.size());
  std::string schema = schemaHash();
  std::memcpy(h + kOffSchemaHash, schema.data(), 32);
  putString(h + kOffCompilerVersion, artifact.compilerVersion, 16);
  putString(h + kOffGitHash, artifact.gitHash, 16);
  putString(h + kOffTarget, artifact.manifest.target(), 16);
  auto content = sha256(llvm::StringRef(file).drop_front(kHeaderBytes));
  std::memcpy(h + kOffContentHash, content.data(), 32);
  return file;
}

namespace {

/// One validating parse of an artifact's bytes (readArtifact), borrowing the
/// constants from `mapping` when it is set. The steps run in the file's
/// order: header, section table and sections, manifest, streams; each error
/// names the artifact and what is wrong where.
class Parser {
public:
  Parser(llvm::StringRef bytes, llvm::StringRef origin,
         llvm::StringRef expectedTarget,
         const std::shared_ptr<const llvm::MemoryBuffer> &mapping)
      : bytes(bytes), origin(origin), expectedTarget(expectedTarget),
        mapping(mapping) {}

  llvm::Expected<Artifact> parse();

private:
  llvm::Error fail(const llvm::Twine &what) const {
    return llvm::createStringError("artifact '" + origin + "': " + what);
  }
  llvm::Error checkHeader() const;
  llvm::Error checkSchema() const;
  llvm::Error readTarget();
  llvm::Error readSections();
  llvm::Error readSection(uint32_t i, const SectionEntry &entry);
  llvm::Error checkManifest() const;
  llvm::Error checkBuffer(const kneff::Buffer &buffer) const;
  llvm::Error decodeStreams();
  llvm::Error decodeStream(const SectionEntry &entry, llvm::StringRef data,
                           const isa::Limits &limits);
  bool compressedStreams() const {
    return artifact.features & kFeatureCompressedStreams;
  }
  llvm::Expected<std::string> decompress(const SectionEntry &entry,
                                         llvm::StringRef data,
                                         llvm::StringRef name) const;

  llvm::StringRef bytes, origin, expectedTarget;
  const std::shared_ptr<const llvm::MemoryBuffer> &mapping;
  Artifact artifact;
  llvm::StringRef headerTarget;
  const target::TargetDescription *targetDescription = nullptr;
  bool haveManifest = false, haveConstants = false;
  // The stream sections in file order, decoded once the manifest is known.
  std::vector<std::pair<SectionEntry, llvm::StringRef>> streams;
};

llvm::Expected<Artifact> Parser::parse() {
  if (auto e = checkHeader()) {
    return std::move(e);
  }
  if (auto e = readTarget()) {
    return std::move(e);
  }
  if (auto e = readSections()) {
    return std::move(e);
  }
  if (auto e = checkManifest()) {
    return std::move(e);
  }
  if (auto e = decodeStreams()) {
    return std::move(e);
  }
  return std::move(artifact);
}

/// The header's magic, version, feature bits, sizes, checksum and schema.
llvm::Error Parser::checkHeader() const {
  if (bytes.size() < kHeaderBytes ||
      std::memcmp(bytes.data(), kMagic, 8) != 0) {
    return fail("not a .kneff file (bad magic or shorter than its header)");
  }
  const char *h = bytes.data();
  uint16_t major = read16le(h + kOffMajor), minor = read16le(h + kOffMinor);
  if (major != kFormatMajor) {
    return fail("format version " + llvm::Twine(major) + "." +
                llvm::Twine(minor) +
                " is not readable by this Kiln (it reads " +
                llvm::Twine(kFormatMajor) + ".x); recompile the graph");
  }
  uint32_t features = read32le(h + kOffFeatures);
  if (features & ~kKnownFeatures) {
    return fail("uses feature bits 0x" +
                llvm::utohexstr(features & ~kKnownFeatures) +
                " that this Kiln does not know; upgrade Kiln");
  }
  if (read32le(h + kOffHeaderBytes) != kHeaderBytes ||
      read64le(h + kOffFileBytes) != bytes.size()) {
    return fail("is truncated or padded: header says " +
                llvm::Twine(read64le(h + kOffFileBytes)) + " bytes, file has " +
                llvm::Twine(bytes.size()));
  }
  auto content = sha256(bytes.drop_front(kHeaderBytes));
  if (std::memcmp(content.data(), h + kOffContentHash, 32) != 0) {
    return fail("checksum mismatch: the file is corrupt");
  }
  return checkSchema();
}

/// The instruction schema the header records is this Kiln's, or an older
/// minor version's.
llvm::Error Parser::checkSchema() const {
  // Minor versions only append opcodes and field values, so an older
  // minor's instructions mean what they meant: accept its schema too.
  struct OlderSchema {
    uint16_t minor;
    llvm::StringLiteral hash;
  };
  // Minor 8 changed the cache, not the instructions: its schema is 7's.
  static const OlderSchema kOlderSchemas[] = {
      {0, "c4a81381e11467c124abbf1578d4fc2f0426903a5949ded1e8571ffe3a86c7dd"},
      {1, "2c2fc8b6fec3bcf7b2cf18055fe42e4703ed9be2b1fc2fe56d41e76b38dd50f0"},
      {2, "706908289f1378bff4d6cb0481f802b24a46627d78135ce7c96c37f1c3c15dfd"},
      {3, "e470e46cfbbcad6bb111663bad126e3a1d7b3867ab840eb154b9cf275436a96e"},
      {4, "ee2bbd48246b2c2f254c9849eef73843bd7aa82b24047c40adf29639032dc2ae"},
      {5, "d442a6917135ce1d12d50b5e80b91eeb92c7d2b5250d69dc8aebeef8254e588c"},
      {6, "7d001be95b5707daf72022658f45daba7e8d2d0c529cdc4676aec9ce3223488e"},
      {7, "f192ccd6815024c1ff0f03fbdadceffaf5af6a6b29d1ea9e57a8da2e129422a2"},
      {8, "f192ccd6815024c1ff0f03fbdadceffaf5af6a6b29d1ea9e57a8da2e129422a2"},
      {9, "611e023f21d8f303bc19bc174a0342bceaec81b7a24a37be3b24b1db78967c1b"}};
  uint16_t minor = read16le(bytes.data() + kOffMinor);
  std::string recorded =
      llvm::toHex(llvm::StringRef(bytes.data() + kOffSchemaHash, 32),
                  /*LowerCase=*/true);
  bool knownOlder = llvm::any_of(kOlderSchemas, [&](const OlderSchema &o) {
    return o.minor == minor && recorded == o.hash;
  });
  if (schemaHash() != llvm::StringRef(bytes.data() + kOffSchemaHash, 32) &&
      !knownOlder) {
    return fail(
        "instruction schema differs from this Kiln's; recompile the graph");
  }
  return llvm::Error::success();
}

/// The header's fields the artifact keeps: the compiler that wrote the
/// file, the format's minor version and feature bits (which the sections
/// are read by), and the target it is for, which must be known (and the
/// one expected, when one is).
llvm::Error Parser::readTarget() {
  const char *h = bytes.data();
  artifact.compilerVersion = getString(h + kOffCompilerVersion, 16).str();
  artifact.gitHash = getString(h + kOffGitHash, 16).str();
  artifact.formatMinor = read16le(h + kOffMinor);
  artifact.features = read32le(h + kOffFeatures);
  headerTarget = getString(h + kOffTarget, 16);
  targetDescription = target::lookupTarget(headerTarget);
  if (!targetDescription) {
    return fail("is for unknown target '" + headerTarget + "'");
  }
  if (!expectedTarget.empty() && headerTarget != expectedTarget) {
    return fail("is compiled for " + headerTarget + ", not " + expectedTarget);
  }
  return llvm::Error::success();
}

/// The section table and each section in it: aligned, in order, inside the
/// file, with exactly one manifest and one constants section.
llvm::Error Parser::readSections() {
  const char *h = bytes.data();
  uint32_t count = read32le(h + kOffSectionCount);
  uint64_t table = read64le(h + kOffSectionTable);
  // Compared without adding to `table`: a table offset near 2^64 would
  // wrap the sum round into the file.
  if (count > 64 || table < kHeaderBytes || table > bytes.size() ||
      uint64_t(count) * kSectionEntryBytes > bytes.size() - table) {
    return fail("section table lies outside the file");
  }
  uint64_t previousEnd = table + uint64_t(count) * kSectionEntryBytes;
  for (uint32_t i = 0; i < count; ++i) {
    const char *e = bytes.data() + table + i * kSectionEntryBytes;
    SectionEntry entry{static_cast<SectionKind>(read32le(e)), read32le(e + 4),
                       read64le(e + 8), read64le(e + 16), read64le(e + 24)};
    if (entry.offset % kAlignment != 0 || entry.offset < previousEnd ||
        entry.offset > bytes.size() ||
        entry.size > bytes.size() - entry.offset) {
      return fail("section " + llvm::Twine(i) +
                  " is misaligned, overlaps another or lies outside the file");
    }
    previousEnd = entry.offset + entry.size;
    if (auto e = readSection(i, entry)) {
      return e;
    }
  }
  if (!haveManifest || !haveConstants) {
    return fail("lacks its manifest or constants section");
  }
  return llvm::Error::success();
}

/// Section `i`, which lies inside the file: the manifest is parsed, the
/// constants and source IR kept, and the streams set aside for
/// decodeStreams.
llvm::Error Parser::readSection(uint32_t i, const SectionEntry &entry) {
  llvm::StringRef data = bytes.substr(entry.offset, entry.size);
  switch (entry.kind) {
  case SectionKind::Manifest:
    if (haveManifest ||
        !artifact.manifest.ParseFromArray(data.data(), data.size())) {
      return fail("manifest section is repeated or not a valid manifest");
    }
    haveManifest = true;
    break;
  case SectionKind::Stream:
    // Divided, not multiplied: 360 * 2^61 wraps to 0, so a count with bit
    // 61 set would pass a product's comparison.
    if (compressedStreams()
            ? entry.count > entry.size * kMaxExpansion / kInstructionBytes
            : entry.size % kInstructionBytes != 0 ||
                  entry.count != entry.size / kInstructionBytes) {
      return fail("stream section " + llvm::Twine(i) + " holds " +
                  llvm::Twine(entry.size) + " bytes, not " +
                  llvm::Twine(entry.count) + " instructions");
    }
    streams.push_back({entry, data});
    break;
  case SectionKind::Constants:
    if (haveConstants) {
      return fail("constants section is repeated");
    }
    if (mapping) {
      artifact.mapping = mapping;
      artifact.mappedConstants = data;
    } else {
      artifact.constants = data.str();
    }
    haveConstants = true;
    break;
  case SectionKind::SourceIR:
    artifact.sourceIR = data.str();
    break;
  default:
    return fail("section " + llvm::Twine(i) + " has unknown kind " +
                llvm::Twine(static_cast<uint32_t>(entry.kind)));
  }
  return llvm::Error::success();
}

/// The manifest agrees with the header's target, fits it, and places every
/// buffer inside the program's HBM.
llvm::Error Parser::checkManifest() const {
  const kneff::Manifest &m = artifact.manifest;
  if (m.target() != headerTarget) {
    return fail("manifest target '" + m.target() +
                "' differs from the header's '" + headerTarget + "'");
  }
  if (m.hbm_bytes() == 0 ||
      m.hbm_bytes() >
          static_cast<uint64_t>(targetDescription->hbmBytesPerCore()) ||
      m.semaphores() >
          static_cast<uint32_t>(targetDescription->semaphores.value)) {
    return fail("manifest asks for " + llvm::Twine(m.hbm_bytes()) +
                " bytes of HBM and " + llvm::Twine(m.semaphores()) +
                " semaphores, beyond a " + targetDescription->name +
                " NeuronCore");
  }
  for (const kneff::Buffer &buffer : m.buffers()) {
    if (auto e = checkBuffer(buffer)) {
      return e;
    }
  }
  return llvm::Error::success();
}

/// A buffer's shape and dtype are sane, it lies inside the program's HBM,
/// and a constant's bytes lie inside the constants section.
llvm::Error Parser::checkBuffer(const kneff::Buffer &buffer) const {
  uint64_t hbmBytes = artifact.manifest.hbm_bytes();
  uint64_t elements = 1;
  for (int64_t d : buffer.shape()) {
    if (d < 1 || d > (int64_t(1) << 40)) {
      return fail("buffer '" + buffer.name() + "' has a bad shape");
    }
    elements *= static_cast<uint64_t>(d);
    if (elements > (uint64_t(1) << 40)) {
      return fail("buffer '" + buffer.name() + "' has a bad shape");
    }
  }
  if (buffer.dtype() > 3) {
    return fail("buffer '" + buffer.name() + "' has unknown dtype " +
                llvm::Twine(buffer.dtype()));
  }
  uint64_t size =
      elements * isa::dtypeBytes(static_cast<isa::DType>(buffer.dtype()));
  if (buffer.offset() > hbmBytes || size > hbmBytes - buffer.offset()) {
    return fail("buffer '" + buffer.name() +
                "' lies outside the program's HBM");
  }
  if (buffer.role() == kneff::CONSTANT &&
      (buffer.constant_bytes() != size ||
       buffer.constant_offset() > artifact.constantBytes().size() ||
       size > artifact.constantBytes().size() - buffer.constant_offset())) {
    return fail("constant buffer '" + buffer.name() +
                "' does not lie inside the constants section");
  }
  return llvm::Error::success();
}

/// The streams, in strictly increasing (engine, queue) order, each decoded
/// and every instruction validated against the manifest's limits.
llvm::Error Parser::decodeStreams() {
  const kneff::Manifest &m = artifact.manifest;
  isa::Limits limits{targetDescription, static_cast<int64_t>(m.hbm_bytes()),
                     static_cast<int64_t>(m.semaphores())};
  uint32_t previousKey = 0;
  for (auto [i, stream] : llvm::enumerate(streams)) {
    const SectionEntry &entry = stream.first;
    if (i > 0 && entry.stream <= previousKey) {
      return fail("streams are repeated or out of order");
    }
    previousKey = entry.stream;
    if (auto e = decodeStream(entry, stream.second, limits)) {
      return e;
    }
  }
  return llvm::Error::success();
}

llvm::Error Parser::decodeStream(const SectionEntry &entry,
                                 llvm::StringRef data,
                                 const isa::Limits &limits) {
  Stream s;
  s.engine = static_cast<isa::Engine>(entry.stream >> 8);
  s.queue = static_cast<uint8_t>(entry.stream & 0xff);
  if ((entry.stream >> 8) >= isa::kEngineKinds) {
    return fail("stream for unknown engine " + llvm::Twine(entry.stream >> 8));
  }
  std::string name = streamName(s.engine, s.queue);
  std::string records;
  if (compressedStreams()) {
    llvm::Expected<std::string> expanded = decompress(entry, data, name);
    if (!expanded) {
      return expanded.takeError();
    }
    records = std::move(*expanded);
    data = records;
  }
  s.instructions.reserve(entry.count);
  for (uint64_t k = 0; k < entry.count; ++k) {
    isa::Instruction inst =
        decodeInstruction(data.data() + k * kInstructionBytes);
    if (inst.engine != s.engine || inst.queue != s.queue) {
      return fail(name + " instruction " + llvm::Twine(k) +
                  " belongs to another engine's stream");
    }
    if (inst.numOperands > isa::kMaxOperands ||
        inst.numWaits > isa::kMaxWaits || inst.numSignals > isa::kMaxSignals) {
      return fail(name + " instruction " + llvm::Twine(k) + " has bad counts");
    }
    if (std::optional<std::string> broken = isa::validate(inst, limits)) {
      return fail(name + " instruction " + llvm::Twine(k) + " ('" +
                  (static_cast<int>(inst.opcode) < isa::kOpcodes
                       ? isa::schemaOf(inst.opcode).mnemonic.str()
                       : std::string("?")) +
                  "'): " + *broken);
    }
    s.instructions.push_back(inst);
  }
  artifact.streams.push_back(std::move(s));
  return llvm::Error::success();
}

/// A compressed stream's records: exactly its count of them.
llvm::Expected<std::string> Parser::decompress(const SectionEntry &entry,
                                               llvm::StringRef data,
                                               llvm::StringRef name) const {
  if (!llvm::compression::zstd::isAvailable()) {
    return fail("has zstd-compressed streams, and this Kiln was built "
                "without zstd");
  }
  std::string records(entry.count * kInstructionBytes, '\0');
  size_t size = records.size();
  llvm::Error broken = llvm::compression::zstd::decompress(
      llvm::arrayRefFromStringRef(data),
      reinterpret_cast<uint8_t *>(records.data()), size);
  if (broken || size != records.size()) {
    std::string why = broken ? llvm::toString(std::move(broken))
                             : "it holds " + std::to_string(size) + " bytes";
    return fail(name + " stream does not decompress to its " +
                llvm::Twine(entry.count) + " instructions (" + why + ")");
  }
  return std::move(records);
}

/// readArtifact, borrowing the constants from `mapping` when it is set.
llvm::Expected<Artifact>
parseArtifact(llvm::StringRef bytes, llvm::StringRef origin,
              llvm::StringRef expectedTarget,
              const std::shared_ptr<const llvm::MemoryBuffer> &mapping) {
  return Parser(bytes, origin, expectedTarget, mapping).parse();
}

} // namespace

llvm::Expected<Artifact> readArtifact(llvm::StringRef bytes,
                                      llvm::StringRef origin,
                                      llvm::StringRef expectedTarget) {
  return parseArtifact(bytes, origin, expectedTarget, nullptr);
}

llvm::Expected<Artifact> loadArtifactFile(llvm::StringRef path,
                                          llvm::StringRef expectedTarget) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer) {
    return llvm::createStringError("cannot read artifact '" + path +
                                   "': " + buffer.getError().message());
  }
  std::shared_ptr<const llvm::MemoryBuffer> mapping = std::move(*buffer);
  return parseArtifact(mapping->getBuffer(), path, expectedTarget, mapping);
}

} // namespace kiln::artifact
